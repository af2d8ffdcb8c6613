import ForsettiBridge
import Foundation

/// What all modules of one host share: the state directory, the log, the event bus, the
/// message router and the telemetry recorder.
public final class HostEnvironment: Sendable {
  public let stateDirectory: String
  public let log: any LogSink
  public let events: EventBus
  public let messages: MessageRouter
  public let telemetry: TelemetryRecorder?

  public init(stateDirectory: String, log: any LogSink) {
    self.stateDirectory = stateDirectory
    self.log = log
    events = EventBus()
    messages = MessageRouter()
    telemetry = TelemetryRecorder(
      path: (stateDirectory as NSString).appendingPathComponent("logs/telemetry.jsonl"))
  }

  /// `sandboxes/<moduleID>/` beneath the state directory, as an absolute path.
  public func sandboxPath(for moduleID: String) -> String {
    let base = (stateDirectory as NSString).appendingPathComponent("sandboxes/\(moduleID)")
    return URL(fileURLWithPath: base).standardizedFileURL.path
  }

  func hostLog(_ level: LogLevel, _ message: String, _ metadata: [String: String] = [:]) {
    log.write(LogRecord(level: level, moduleID: nil, message: message, metadata: metadata))
  }
}
