import ForsettiCore
import ForsettiRuntime

/// What the most recent `run` in a state directory published (`runtime.json`, `surface.json`).
struct LastRun {
  var pid: Int32
  var alive: Bool
  /// moduleID → (state, reason)
  var states: [String: (state: String, reason: String?)]

  static func read(stateDirectory: String) throws(CommandFailure) -> LastRun? {
    let path = RuntimeStateFile.runtimePath(stateDirectory)
    guard let value = try HostOptions.readJSON(path, option: "state", missingOK: true),
      let root = value.objectValue, let pid = root["pid"]?.integerValue.map(Int32.init)
    else { return nil }
    var states: [String: (String, String?)] = [:]
    for case .object(let m) in root["modules"]?.arrayValue ?? [] {
      guard let id = m["moduleID"]?.stringValue, let state = m["state"]?.stringValue else { continue }
      states[id] = (state, m["reason"]?.stringValue)
    }
    return LastRun(pid: pid, alive: RuntimeStateFile.isAlive(pid), states: states)
  }

  var label: String { alive ? "running host (pid \(pid))" : "last run (pid \(pid), no longer running)" }
}
