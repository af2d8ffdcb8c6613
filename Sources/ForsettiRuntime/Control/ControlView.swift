import ForsettiCore

/// What a control answer is computed from: a judge (the running host's own, with its in-memory
/// overrides, or a fresh one over the files when no host runs), the modules' run states and the
/// health they reported (known only to a running host).
package struct ControlView: Sendable {
  package var judge: Judge
  /// nil: no host has published run states.
  package var run: RunStates?
  /// nil: nobody knows (no running host answers).
  package var health: [String: ModuleHealth]?
  /// Whether the in-memory overrides are the answering host's (false on the files).
  package var inMemoryKnown: Bool
  /// The modules serving a role in the answering host, and their load (`RoleServingReport`);
  /// empty on the files.
  package var serving: [String: JSONValue] = [:]

  /// A view of what `judge` judges, with these run states and reports.
  package init(judge: Judge, run: RunStates?, health: [String: ModuleHealth]?, inMemoryKnown: Bool) {
    self.judge = judge
    self.run = run
    self.health = health
    self.inMemoryKnown = inMemoryKnown
  }

  /// The view with no host: a fresh judge over the files, and what the last host published.
  package static func files(_ judge: Judge) throws(ControlFailure) -> ControlView {
    let run: RunStates?
    do { run = try RunStates.published(stateDirectory: judge.configuration.stateDirectory) } catch {
      throw ControlFailure.judging(error)
    }
    return ControlView(judge: judge, run: run, health: nil, inMemoryKnown: false)
  }

  /// The state directory the judge reads.
  package var stateDirectory: String { judge.configuration.stateDirectory }
}

extension ControlFailure {
  /// A judging failure (an input missing or malformed) as an answer's failure, about the
  /// setting that led to the input.
  package static func judging(_ e: JudgeError) -> ControlFailure {
    switch e {
    case .manifests(let m): return manifests(m)
    case .file(let setting, let path, let reason):
      guard let field = field(judging: setting) else {
        return ControlFailure(.failed, "\(setting) \(path): \(reason)")
      }
      return .located(.failed, field, path, reason)
    }
  }

  /// The manifest directory could not be read.
  static func manifests(_ e: ManifestSourceError) -> ControlFailure {
    let path =
      switch e {
      case .notADirectory(let p), .unreadable(let p, _), .tooLarge(let p, _): p
      }
    return ControlFailure(.failed, "manifest directory: \(e)", field: .manifestsDirectory, value: path)
  }

  /// No manifest declares `id`, with the closest ID that one does.
  static func noModule(_ id: String, among known: [String], manifests: String) -> ControlFailure {
    let hint = Suggestion.closest(to: id, among: known).map { "; did you mean '\($0)'?" } ?? ""
    return .located(
      .notFound, .manifestsDirectory, manifests, "no manifest declares module \(id)\(hint)", field: .module,
      value: id)
  }

  /// The configuration field a judge's setting names (`JudgeError.file`: host.conf's keys).
  private static func field(judging setting: String) -> Field? {
    switch setting {
    case "state": .stateDirectory
    case "manifests": .manifestsDirectory
    case "policy": .policyFile
    case "entitlements": .entitlementsFile
    default: nil
    }
  }
}
