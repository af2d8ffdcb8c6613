import ForsettiBridge
import ForsettiCore
import Foundation
import Synchronization

/// Appends telemetry events as JSON lines to `logs/telemetry.jsonl` in the state directory.
public final class TelemetryRecorder: Sendable {
  public let path: String
  private let fd: Mutex<Int32>

  public init?(path: String) {
    try? FileManager.default.createDirectory(
      atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
    guard fd >= 0 else { return nil }
    self.path = path
    self.fd = Mutex(fd)
  }

  deinit { fd.withLock { _ = close($0) } }

  /// Records one event; `attributes` must be a JSON object when given.
  public func record(moduleID: String, name: String, attributes: JSONValue?) {
    let time = ISO8601DateFormatter.string(
      from: Date(), timeZone: .gmt, formatOptions: [.withInternetDateTime, .withFractionalSeconds])
    let line = JSONValue.object(
      JSONObject([
        ("time", .string(time)), ("module", .string(moduleID)), ("event", .string(name)),
        ("attributes", attributes ?? .object(JSONObject())),
      ]))
    let bytes = Array((JSONWriter.string(line) + "\n").utf8)
    fd.withLock { _ = FileDescriptor.writeAll($0, bytes) }
  }
}
