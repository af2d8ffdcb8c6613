import ForsettiCore

/// The `approve` and `revoke` answers: the user's decisions written to `approvals.json` (one
/// `StateTransaction`), and the capabilities approved afterwards.
enum ApprovalAnswers {
  static func approve(_ id: String, _ wanted: [Capability]?, judge: Judge) throws(ControlFailure)
    -> ApprovalAnswer
  {
    let m = try ActivationAnswers.manifest(id, judge: judge)
    let caps = wanted.map(Set.init) ?? m.capabilitySet
    let notRequested = caps.subtracting(m.capabilitySet)
    guard notRequested.isEmpty else {
      throw .invalid(
        .capabilities, notRequested.sorted().map(\.rawValue).joined(separator: ","),
        why: "\(id) does not request these")
    }
    let store = ApprovalStore(stateDirectory: judge.configuration.stateDirectory)
    do { return result(id, try store.approve(id, caps)) } catch {
      throw .located(.failed, .stateDirectory, store.path, "\(error)")
    }
  }

  static func revoke(_ id: String, _ wanted: [Capability]?, judge: Judge) throws(ControlFailure)
    -> ApprovalAnswer
  {
    let store = ApprovalStore(stateDirectory: judge.configuration.stateDirectory)
    do { return result(id, try store.revoke(id, wanted.map(Set.init)) ?? []) } catch {
      throw .located(.failed, .stateDirectory, store.path, "\(error)")
    }
  }

  static func result(_ id: String, _ s: Set<Capability>) -> ApprovalAnswer {
    ApprovalAnswer(moduleID: id, approved: s)
  }
}
