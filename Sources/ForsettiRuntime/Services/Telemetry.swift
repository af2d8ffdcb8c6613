import ForsettiBridge
import ForsettiCore
import FoundationEssentials
import Glibc

/// Appends telemetry events as JSON lines to `logs/telemetry.jsonl` in the state directory,
/// rotated by size (`telemetry.jsonl.1` …), each module within its telemetry rate limit.
package final class TelemetryRecorder: Sendable {
  package let path: String
  /// The file written, for its size and rotation.
  package let file: RotatingLogFile
  private let limiter: ModuleRateLimiter?

  /// Opens (creating, with its directory) `path`; nil when it cannot be opened. Without a
  /// `limiter`, every event is written.
  package init?(path: String, rotation: RotationPolicy = .standard, limiter: ModuleRateLimiter? = nil) {
    try? FileManager.default.createDirectory(
      atPath: PathText.parent(path), withIntermediateDirectories: true)
    guard let file = RotatingLogFile(path: path, policy: rotation) else { return nil }
    self.path = path
    self.file = file
    self.limiter = limiter
  }

  /// Records one event; `attributes` must be a JSON object when given. False when the event
  /// was not written: over the module's rate limit, or the file could not be written (said once
  /// on stderr).
  @discardableResult
  package func record(moduleID: String, name: String, attributes: JSONValue?) -> Bool {
    // Admitted before the line is made, so a flood's dropped events cost no JSON writing.
    if let limiter, !limiter.admit(moduleID, .telemetry, bytes: 1) { return false }
    let line = JSONValue.object(
      JSONObject([
        ("time", .string(LogTime.now())), ("module", .string(moduleID)), ("event", .string(name)),
        ("attributes", attributes ?? .object(JSONObject())),
      ]))
    let bytes = Array((JSONWriter.string(line) + "\n").utf8)
    limiter?.charge(moduleID, .telemetry, bytes: bytes.count)
    return file.append(bytes)
  }
}
