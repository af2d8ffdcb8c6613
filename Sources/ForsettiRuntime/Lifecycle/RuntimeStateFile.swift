import ForsettiBridge
import ForsettiCore
import Foundation

/// What a running host publishes in its state directory: `runtime.json` (its modules and their
/// states) and `surface.json` (the composed UI surface), each stamped with the host's PID.
public struct RuntimeStateFile: Sendable {
  public var pid: Int32
  public var records: [ModuleRecord]
  public var surface: Surface

  public static func runtimePath(_ stateDirectory: String) -> String {
    (stateDirectory as NSString).appendingPathComponent("runtime.json")
  }

  public static func surfacePath(_ stateDirectory: String) -> String {
    (stateDirectory as NSString).appendingPathComponent("surface.json")
  }

  var runtimeJSON: JSONValue {
    .object(
      JSONObject([
        ("pid", .number(String(pid))),
        (
          "modules",
          .array(
            records.map { .object($0.summaryJSON) })
        ),
      ]))
  }

  var surfaceJSON: JSONValue {
    guard case .object(var o) = surface.json else { return surface.json }
    o["pid"] = .number(String(pid))
    return .object(o)
  }

  /// Whether process `pid` is alive (signal 0 probes without sending anything).
  public static func isAlive(_ pid: Int32) -> Bool { pid > 0 && (kill(pid, 0) == 0 || errno == EPERM) }
}
