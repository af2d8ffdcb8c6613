import ForsettiCore

/// Which eligible modules the activation state keeps off: `STATE/activation.json` and the
/// default policy, applied by `ActivationRules` to the modules that passed every gate.
///
/// Two facts of the running host refine the automatic choice of the UI module (never an
/// explicit `select`): a UI module that failed at this version is passed over, so a broken one
/// does not leave the host without UI; and the UI module that runs keeps running while it may,
/// rather than giving way to one that sorts first and has just become eligible.
enum ActivationPlan {
  /// `STATE/activation.json` as it is now (the default state when there is none).
  static func stored(_ configuration: HostConfiguration) throws(JudgeError) -> ActivationState {
    let store = ActivationStore(stateDirectory: configuration.stateDirectory)
    do { return try store.load() ?? ActivationState() } catch {
      throw .file(setting: "state", path: error.path, reason: error.reason)
    }
  }

  /// `stored` is the activation state an earlier round read, when its file is known not to
  /// have changed since (nil: read now).
  static func inactive(
    _ v: Judge.Verdicts, _ configuration: HostConfiguration, stored: ActivationState? = nil,
    failed: Set<String> = [], running: Set<String> = []
  ) throws(JudgeError)
    -> [String: DesiredState.Inactive]
  {
    var state: ActivationState
    if let stored { state = stored } else { state = try Self.stored(configuration) }
    var candidates = v.judgements.compactMap { j -> ActivationCandidate? in
      guard j.passed, let m = j.manifest else { return nil }
      return ActivationCandidate(m, v.context.entitlement(m))
    }
    if state.ui == .automatic {
      candidates.removeAll { $0.moduleType.isVisual && failed.contains($0.moduleID) }
      let current = candidates.first { c in
        c.moduleType.isVisual && running.contains(c.moduleID) && !state.disabled.contains(c.moduleID)
      }
      if let current { state.ui = .module(current.moduleID) }
    }
    var out: [String: DesiredState.Inactive] = [:]
    for (id, verdict) in ActivationRules.decide(
      candidates, state: state, defaultPolicy: configuration.defaultPolicy)
    {
      if case .inactive(let reason, let why) = verdict { out[id] = .init(reason: reason, why: why) }
    }
    return out
  }
}
