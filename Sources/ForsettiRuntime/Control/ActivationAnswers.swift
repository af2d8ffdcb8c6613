import ForsettiCore

/// The `enable`, `disable` and `select` answers: the operator's activation state written to
/// `activation.json` (one `StateTransaction`), and that state afterwards with what was done.
enum ActivationAnswers {
  static func enable(_ id: String, judge: Judge) throws(ControlFailure) -> ActivationAnswer {
    let m = try manifest(id, judge: judge)
    return try update(judge, done: "enabled \(m.moduleID)") { $0.enable(m.moduleID) }
  }

  static func disable(_ id: String, judge: Judge) throws(ControlFailure) -> ActivationAnswer {
    let m = try manifest(id, judge: judge)
    return try update(judge, done: "disabled \(m.moduleID)") { $0.disable(m.moduleID) }
  }

  static func select(_ id: String?, judge: Judge) throws(ControlFailure) -> ActivationAnswer {
    guard let id else { return try update(judge, done: "no UI module selected") { $0.selectNone() } }
    let m = try manifest(id, judge: judge)
    guard m.moduleType.isVisual else {
      throw .located(
        .refused, .manifestsDirectory, judge.configuration.manifestsDirectory,
        "select is for ui and app modules; \(m.moduleID) is a \(m.moduleType.rawValue) module; enable it instead",
        field: .module, value: id)
    }
    return try update(judge, done: "selected \(m.moduleID) as the UI module") { $0.select(m.moduleID) }
  }

  /// The valid manifest declaring `id` in the judge's manifest directory.
  static func manifest(_ id: String, judge: Judge) throws(ControlFailure) -> ModuleManifest {
    let dir = judge.configuration.manifestsDirectory
    let report: DiscoveryReport
    do { report = try ManifestDiscovery.discover(from: DirectoryManifestSource(root: dir)) } catch {
      throw .manifests(error)
    }
    if let m = report.manifests.first(where: { $0.moduleID == id }) { return m }
    throw .noModule(id, among: report.manifests.map(\.moduleID), manifests: dir)
  }

  private static func update(_ judge: Judge, done: String, _ change: (inout ActivationState) -> Void)
    throws(ControlFailure) -> ActivationAnswer
  {
    let store = ActivationStore(stateDirectory: judge.configuration.stateDirectory)
    let state: ActivationState
    do { state = try store.update(change) } catch {
      throw .located(.failed, .stateDirectory, error.path, error.reason)
    }
    return ActivationAnswer(state: state, done: done)
  }
}
