import ForsettiBridge
import ForsettiCore
import FoundationEssentials
import Glibc
import Synchronization

/// One log line. The module ID is stamped by the host, never taken from the module.
public struct LogRecord: Sendable, Hashable {
  public var level: LogLevel
  /// nil for the host's own lines.
  public var moduleID: String?
  public var message: String
  public var metadata: [String: String]
  /// Who wrote the line: a module's own lines are rate-limited, the host's never are.
  public var origin: Origin
  /// The reason code of a host line about a module (a refusal, a blocked start), for the
  /// journal's `FORSETTI_REASON`; not part of ``formatted`` (the message names it already).
  public var reason: ReasonCode?
  /// The module a host line without a module ID is about (`[host] started X`, `stopped X`),
  /// for the journal's `FORSETTI_MODULE`, so `journalctl FORSETTI_MODULE=X` tells X's whole
  /// story; not part of ``formatted`` (the message names it already).
  public var subject: String?
  /// Where in the host's source a host line was written, for the journal's `CODE_FILE`,
  /// `CODE_LINE` and `CODE_FUNC`; nil for a module's text, whose place the host does not know.
  public var place: Place?

  /// A place in the host's source: `#fileID`, `#line`, `#function` of the log call.
  public struct Place: Sendable, Hashable {
    public var file: String
    public var line: Int
    public var function: String
  }

  /// The writer of a line. Never read from the module: the host decides it.
  public enum Origin: Sendable, Hashable {
    /// The host's own line, about itself or about a module (a crash, a refusal, a count of
    /// dropped lines).
    case host
    /// Text of the module: its log calls and its standard output and error.
    case module
  }

  /// `origin` defaults to `.module` for a line with a module ID, else `.host`: a line about a
  /// module that the host must never drop passes `.host`.
  public init(
    level: LogLevel, moduleID: String?, message: String, metadata: [String: String] = [:],
    origin: Origin? = nil, reason: ReasonCode? = nil, file: String = #fileID, line: Int = #line,
    function: String = #function
  ) {
    self.level = level
    self.moduleID = moduleID
    self.message = message
    self.metadata = metadata
    let origin = origin ?? (moduleID == nil ? .host : .module)
    self.origin = origin
    self.reason = reason
    self.place = origin == .host ? Place(file: file, line: line, function: function) : nil
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

  /// Module text made safe for a line of standard output or error outside a log record (a
  /// report's detail quoting a module's last lines): control characters escaped, so it cannot
  /// start a line or reorder one (`ModuleText`), and a priority prefix neutralised (``StreamLogSink/neutralised(_:)``).
  package static func streamSafe(_ s: String) -> String { StreamLogSink.neutralised(escaped(s)) }

  /// Module text as visible escapes, by the one rule (`ModuleText`).
  static func escaped(_ s: String) -> String { ModuleText.visible(s) }

  /// A metadata value, in quotes when it holds anything but a plain word.
  static func quoted(_ v: String) -> String {
    let plain =
      !v.isEmpty
      && v.unicodeScalars.allSatisfy {
        ($0.properties.isAlphabetic || $0.properties.numericType != nil
          || "._-/:@".unicodeScalars.contains($0)) && $0.isASCII
      }
    return plain ? v : "\"" + escaped(v).replacing("\"", with: "\\\"") + "\""
  }
}

/// Where log records go. Implementations must be thread-safe: modules log from any thread.
public protocol LogSink: Sendable {
  func write(_ record: LogRecord)
}

/// Writes records as lines to a file descriptor (standard output by default), warnings and
/// errors to another (standard error by default), as a service manager expects: a unit's
/// `StandardError=` and a shell's `2>` then hold what needs a look. A failed write (a closed
/// pipe) is said once on standard error; the host goes on.
///
/// When `$JOURNAL_STREAM` names the descriptor a line goes to, systemd's journal reads it: the
/// line starts with its syslog priority (`<3>` error, `<4>` warning, `<6>` info, `<7>` debug, as
/// sd-daemon(3) defines them) instead of the level word, and `journalctl -p warning` finds it.
public final class StreamLogSink: LogSink {
  private let output: Target
  /// Where warnings and errors go: `output` itself when they are not split off.
  private let errors: Target
  private let minimum: LogLevel
  /// One lock over both streams, so that a warning and the info line after it keep their order
  /// for a reader of both, and each stream's failure is said once.
  private let notices: Mutex<Notices>

  /// Lines at `minimum` and above to `fd`, warnings and errors to standard error; under
  /// systemd's journal (`$JOURNAL_STREAM`), with syslog priorities.
  public convenience init(fd: Int32, minimum: LogLevel = .info) {
    self.init(fd: fd, minimum: minimum, noticeFD: 2, errorsTo: 2, journal: .environment)
  }

  /// `noticeFD` is where a failure to write is said (standard error; a pipe in tests).
  /// `errorsTo` is where warnings and errors go (nil: to `fd` with the rest). `journal` is the
  /// journal stream, if any; by default the one `$JOURNAL_STREAM` names.
  package init(
    fd: Int32 = 1, minimum: LogLevel = .info, noticeFD: Int32 = 2, errorsTo: Int32? = 2,
    journal: JournalStream? = .environment
  ) {
    output = Target(fd: fd, journal: journal?.isConnected(fd) ?? false)
    let errorFD = errorsTo ?? fd
    errors = errorFD == fd ? output : Target(fd: errorFD, journal: journal?.isConnected(errorFD) ?? false)
    self.minimum = minimum
    notices = Mutex(
      Notices(
        output: WriteFailureNotice(what: Self.name(of: fd), fd: noticeFD),
        errors: WriteFailureNotice(what: Self.name(of: errorFD), fd: noticeFD)))
    // A reader that goes away (`forsetti-host run | head`) must cost lines, not the host:
    // without this the next line's write raises SIGPIPE and kills it with every module.
    signal(SIGPIPE, SIG_IGN)
  }

  public func write(_ record: LogRecord) {
    guard record.level >= minimum else { return }
    let split = record.level >= .warning && errors.fd != output.fd
    let target = split ? errors : output
    let body = Self.neutralised(record.formatted)
    let line =
      target.journal
      ? "<\(Self.syslogPriority(record.level))>\(body)\n"
      : "\(record.level.name.padded(to: 7)) \(body)\n"
    notices.withLock { n in
      if split {
        Self.write(line, to: target.fd, notice: &n.errors)
      } else {
        Self.write(line, to: target.fd, notice: &n.output)
      }
    }
  }

  /// The syslog priority of a level (sd-daemon(3): `SD_ERR` 3, `SD_WARNING` 4, `SD_INFO` 6,
  /// `SD_DEBUG` 7). Nothing the host or a module logs is ever above error (0–2).
  package static func syslogPriority(_ level: LogLevel) -> Int {
    switch level {
    case .debug: 7
    case .info: 6
    case .warning: 4
    case .error: 3
    }
  }

  /// `text` with every `<` that a digit follows written `\u{3c}`. The journal (and
  /// `systemd-cat`) reads a priority prefix `<N>` at the start of every piece of a stream it
  /// cuts, not only after a newline: after a NUL, and inside a line longer than its `LineMax`
  /// (48 KiB by default, configurable down to 79 bytes), so any position of a long module line
  /// may become the start of a record. A `<` before a digit anywhere but in the host's own prefix
  /// is what would let a module set a priority (`<0>` is emergency, which journald may also
  /// broadcast to every terminal); NULs and other control characters are escaped already.
  package static func neutralised(_ text: String) -> String {
    guard text.utf8.contains(UInt8(ascii: "<")) else { return text }
    var out = ""
    out.reserveCapacity(text.utf8.count)
    var scalars = text.unicodeScalars.makeIterator()
    var pending = scalars.next()
    while let u = pending {
      let next = scalars.next()
      if u == "<", let n = next, ("0"..."9").contains(n) {
        out += "\\u{3c}"
      } else {
        out.unicodeScalars.append(u)
      }
      pending = next
    }
    return out
  }

  private static func name(of fd: Int32) -> String {
    switch fd {
    case 1: "standard output"
    case 2: "standard error"
    default: "file descriptor \(fd)"
    }
  }

  private static func write(_ line: String, to fd: Int32, notice: inout WriteFailureNotice) {
    if FileDescriptor.writeAll(fd, Array(line.utf8)) {
      notice.succeeded()
    } else if fd != notice.fd {
      // A failing standard error cannot be told so on itself.
      notice.failed("write to", errno: errno)
      notice.lostLine()
    }
  }

  /// A descriptor written to, and whether the journal reads it.
  private struct Target: Sendable {
    let fd: Int32
    let journal: Bool
  }

  /// The failure notices of the two streams.
  private struct Notices: Sendable {
    var output: WriteFailureNotice
    var errors: WriteFailureNotice
  }

  /// The stream systemd connects a service's standard output and error to, as
  /// `$JOURNAL_STREAM` names it: `DEVICE:INODE` in decimal (systemd.exec(5)). A descriptor is
  /// read by the journal when fstat(2) gives that device and inode; a descriptor redirected
  /// elsewhere (`ExecStart=sh -c '… >file'`) keeps the variable but not the stream, so the
  /// variable alone never turns the prefix on.
  package struct JournalStream: Sendable, Hashable {
    package var device: UInt64
    package var inode: UInt64

    package init(device: UInt64, inode: UInt64) {
      self.device = device
      self.inode = inode
    }

    /// Parses `DEVICE:INODE`; nil for anything else.
    package init?(_ value: String) {
      let parts = value.split(separator: ":", omittingEmptySubsequences: false)
      guard parts.count == 2, let d = UInt64(parts[0]), let i = UInt64(parts[1]) else { return nil }
      self.init(device: d, inode: i)
    }

    /// The stream this process's `$JOURNAL_STREAM` names, if any.
    package static var environment: JournalStream? {
      ProcessInfo.processInfo.environment["JOURNAL_STREAM"].flatMap { JournalStream($0) }
    }

    /// The stream `fd` is open on (its device and inode), whatever it is.
    package static func of(_ fd: Int32) -> JournalStream? {
      var st = stat()
      guard fstat(fd, &st) == 0 else { return nil }
      return JournalStream(device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
    }

    /// Whether `fd` is open on this stream.
    package func isConnected(_ fd: Int32) -> Bool { Self.of(fd) == self }
  }
}

/// Appends records to a log file (all levels), rotated by size: `host.log`, `host.log.1` …
package final class FileLogSink: LogSink {
  /// The file written, for its size and path.
  package let file: RotatingLogFile

  /// Opens (creating) `path` for appending; nil when it cannot be opened.
  package init?(path: String, rotation: RotationPolicy = .standard) {
    guard let file = RotatingLogFile(path: path, policy: rotation) else { return nil }
    self.file = file
  }

  /// Writes into an already opened rotating file (tests give it a clock or a notice pipe).
  package init(file: RotatingLogFile) { self.file = file }

  package func write(_ record: LogRecord) {
    file.append(Array("\(LogTime.now()) \(record.level.name) \(record.formatted)\n".utf8))
  }
}

/// Keeps records in memory; for tests and for showing a module's last lines after a failure.
public final class MemoryLogSink: LogSink {
  private let records = Mutex<[LogRecord]>([])

  public init() {}

  public func write(_ record: LogRecord) { records.withLock { $0.append(record) } }

  public var all: [LogRecord] { records.withLock { $0 } }
}

/// Passes the host's lines on, and a module's own lines only as far as its rate limit allows.
/// The one place every module line goes through: its log calls and its standard output and
/// error, in-process or from a worker, reach the host log through `HostEnvironment.log`.
/// A worker's standard output (`stream=output`) is also paced: its reader waits rather than
/// read faster than ``LogLimits/outputReadFactor`` times the limit.
package struct RateLimitedLogSink: LogSink {
  package let inner: any LogSink
  package let limiter: ModuleRateLimiter

  package init(_ inner: any LogSink, limiter: ModuleRateLimiter) {
    self.inner = inner
    self.limiter = limiter
  }

  package func write(_ record: LogRecord) {
    guard record.origin == .module, let id = record.moduleID else {
      inner.write(record)
      return
    }
    if record.metadata["stream"] == "output" {
      // Only the thread reading a worker's standard output writes these: it may wait.
      var delay = limiter.outputReadDelay(id)
      while delay > 0 {
        usleep(UInt32(min(delay, 1) * 1e6))
        delay = limiter.outputReadDelay(id)
      }
    }
    var bytes = record.message.utf8.count
    for (k, v) in record.metadata { bytes &+= k.utf8.count &+ v.utf8.count }
    if limiter.admit(id, .log, bytes: bytes) { inner.write(record) }
  }
}

/// Sends each record to several sinks.
package struct FanOutLogSink: LogSink {
  package var sinks: [any LogSink]

  package init(_ sinks: [any LogSink]) { self.sinks = sinks }

  package func write(_ record: LogRecord) { for s in sinks { s.write(record) } }
}

/// Timestamps of log lines: UTC, milliseconds, as ISO 8601 (`2026-12-03T14:00:00.123Z`),
/// the same text ISO8601DateFormatter gives, made without a formatter per line.
enum LogTime {
  static func now() -> String {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    var t = ts.tv_sec
    var tm = Glibc.tm()
    guard gmtime_r(&t, &tm) != nil else { return "1970-01-01T00:00:00.000Z" }
    func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
    let ms = Int(ts.tv_nsec / 1_000_000)
    let millis = ms < 10 ? "00\(ms)" : ms < 100 ? "0\(ms)" : "\(ms)"
    return
      "\(Int(tm.tm_year) + 1900)-\(two(tm.tm_mon + 1))-\(two(tm.tm_mday))T\(two(tm.tm_hour)):\(two(tm.tm_min)):\(two(tm.tm_sec)).\(millis)Z"
  }
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
