import ForsettiCore

/// The modules' run states a control answer shows: the answering host's own, or what the last
/// host on the state directory published (`runtime.json`) when none answers.
package struct RunStates: Sendable {
  package var pid: Int32
  package var alive: Bool
  /// moduleID → state name and reason code.
  package var states: [String: (state: String, reason: String?)]
  /// moduleID → the version of the module running (not of its manifest file now).
  package var versions: [String: String] = [:]

  /// The states of the host `pid`, running or not.
  package init(pid: Int32, alive: Bool, states: [String: (state: String, reason: String?)]) {
    self.pid = pid
    self.alive = alive
    self.states = states
  }

  /// The running host's own: its records as they are now.
  package static func live(_ records: [ModuleRecord], pid: Int32) -> RunStates {
    var states: [String: (state: String, reason: String?)] = [:]
    for r in records {
      guard let id = r.moduleID else { continue }
      states[id] = (r.state.name, r.state.reason?.rawValue)
    }
    var run = RunStates(pid: pid, alive: true, states: states)
    for r in records where r.state == .started {
      if let id = r.moduleID, let v = r.manifest?.moduleVersion { run.versions[id] = v.description }
    }
    return run
  }

  /// What the last host published in `stateDirectory`; nil when nothing was.
  package static func published(stateDirectory: String) throws(JudgeError) -> RunStates? {
    let path = RuntimeStateFile.runtimePath(stateDirectory)
    guard let value = try Judge.readJSON(path, setting: "state", missingOK: true),
      let root = value.objectValue, let pid = root["pid"]?.integerValue.flatMap(Int32.init(exactly:))
    else { return nil }
    var states: [String: (state: String, reason: String?)] = [:]
    var versions: [String: String] = [:]
    for case .object(let m) in root["modules"]?.arrayValue ?? [] {
      guard let id = m["moduleID"]?.stringValue, let state = m["state"]?.stringValue else { continue }
      states[id] = (state, m["reason"]?.stringValue)
      if let v = m["runningVersion"]?.stringValue { versions[id] = v }
    }
    var run = RunStates(pid: pid, alive: RuntimeStateFile.isAlive(pid), states: states)
    run.versions = versions
    return run
  }
}
