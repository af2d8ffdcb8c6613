import ForsettiBridge
import ForsettiCore
import FoundationEssentials
import Glibc

/// What a running host publishes in its state directory: `runtime.json` (its modules and their
/// states) and `surface.json` (the composed UI surface), each stamped with the host's PID.
package struct RuntimeStateFile: Sendable {
  package var pid: Int32
  package var records: [ModuleRecord]
  package var surface: Surface

  static let runtimeName = "runtime.json"
  static let surfaceName = "surface.json"

  package static func runtimePath(_ stateDirectory: String) -> String {
    PathText.join(stateDirectory, runtimeName)
  }

  package static func surfacePath(_ stateDirectory: String) -> String {
    PathText.join(stateDirectory, surfaceName)
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
  package static func isAlive(_ pid: Int32) -> Bool { pid > 0 && (kill(pid, 0) == 0 || errno == EPERM) }
}
