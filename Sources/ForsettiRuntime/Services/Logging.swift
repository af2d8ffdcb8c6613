import ForsettiBridge
import Foundation
import Synchronization

/// One log line. The module ID is stamped by the host, never taken from the module.
public struct LogRecord: Sendable, Hashable {
  public var level: LogLevel
  /// nil for the host's own lines.
  public var moduleID: String?
  public var message: String
  public var metadata: [String: String]

  public init(level: LogLevel, moduleID: String?, message: String, metadata: [String: String] = [:]) {
    self.level = level
    self.moduleID = moduleID
    self.message = message
    self.metadata = metadata
  }

  /// `[module=<id> k=v …] message`, metadata sorted by key (the Forsetti format).
  /// Module text is escaped so that a module cannot forge a line (a newline followed by a fake
  /// `[host]` prefix) or a field (`x module=other` inside a metadata value).
  public var formatted: String {
    var parts: [String] = []
    if let moduleID { parts.append("module=\(moduleID)") } else { parts.append("host") }
    for (k, v) in metadata.sorted(by: { $0.key < $1.key }) { parts.append("\(k)=\(Self.quoted(v))") }
    return "[\(parts.joined(separator: " "))] \(Self.escaped(message))"
  }

  /// Control characters as visible escapes (`\n`, `\u{1b}`).
  static func escaped(_ s: String) -> String {
    guard s.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else { return s }
    var out = ""
    for u in s.unicodeScalars {
      switch u {
      case "\n": out += "\\n"
      case "\r": out += "\\r"
      case "\t": out += "\\t"
      default: out += u.value < 0x20 || u.value == 0x7F ? "\\u{\(String(u.value, radix: 16))}" : String(u)
      }
    }
    return out
  }

  /// A metadata value, in quotes when it holds anything but a plain word.
  static func quoted(_ v: String) -> String {
    let plain =
      !v.isEmpty
      && v.unicodeScalars.allSatisfy {
        ($0.properties.isAlphabetic || $0.properties.numericType != nil
          || "._-/:@".unicodeScalars.contains($0)) && $0.isASCII
      }
    return plain ? v : "\"" + escaped(v).replacingOccurrences(of: "\"", with: "\\\"") + "\""
  }
}

/// Where log records go. Implementations must be thread-safe: modules log from any thread.
public protocol LogSink: Sendable {
  func write(_ record: LogRecord)
}

/// Writes records as lines to a file descriptor (standard output by default).
public final class StreamLogSink: LogSink {
  private let fd: Int32
  private let minimum: LogLevel
  private let lock = Mutex(())

  public init(fd: Int32 = 1, minimum: LogLevel = .info) {
    self.fd = fd
    self.minimum = minimum
  }

  public func write(_ record: LogRecord) {
    guard record.level >= minimum else { return }
    let line = "\(record.level.name.padding(toLength: 7, withPad: " ", startingAt: 0)) \(record.formatted)\n"
    lock.withLock { _ in _ = FileDescriptor.writeAll(fd, Array(line.utf8)) }
  }
}

/// Appends records to a log file (all levels).
public final class FileLogSink: LogSink {
  private let fd: Int32

  /// Opens (creating) `path` for appending; nil when it cannot be opened.
  public init?(path: String) {
    let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
    guard fd >= 0 else { return nil }
    self.fd = fd
  }

  deinit { close(fd) }

  public func write(_ record: LogRecord) {
    let stamp = ISO8601DateFormatter.string(
      from: Date(), timeZone: .gmt, formatOptions: [.withInternetDateTime, .withFractionalSeconds])
    FileDescriptor.writeAll(fd, Array("\(stamp) \(record.level.name) \(record.formatted)\n".utf8))
  }
}

/// Keeps records in memory; for tests and for showing a module's last lines after a failure.
public final class MemoryLogSink: LogSink {
  private let records = Mutex<[LogRecord]>([])

  public init() {}

  public func write(_ record: LogRecord) { records.withLock { $0.append(record) } }

  public var all: [LogRecord] { records.withLock { $0 } }
}

/// Sends each record to several sinks.
public struct FanOutLogSink: LogSink {
  public var sinks: [any LogSink]

  public init(_ sinks: [any LogSink]) { self.sinks = sinks }

  public func write(_ record: LogRecord) { for s in sinks { s.write(record) } }
}

enum FileDescriptor {
  /// Writes every byte, retrying on short writes and EINTR.
  @discardableResult
  static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
    var offset = 0
    while offset < bytes.count {
      let n = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
      if n < 0 {
        if errno == EINTR { continue }
        return false
      }
      offset += n
    }
    return true
  }
}
