import ForsettiCore

/// Which eligible modules the activation state keeps off: `STATE/activation.json` and the
/// default policy, applied by `ActivationRules` to the modules that passed every gate.
enum ActivationPlan {
  static func inactive(_ v: Judge.Verdicts, _ configuration: HostConfiguration) throws(JudgeError)
    -> [String: DesiredState.Inactive]
  {
    let store = ActivationStore(stateDirectory: configuration.stateDirectory)
    let state: ActivationState
    do { state = try store.load() ?? ActivationState() } catch {
      throw .file(setting: "state", path: error.path, reason: error.reason)
    }
    let candidates = v.judgements.compactMap { j -> ActivationCandidate? in
      guard j.passed, let m = j.manifest else { return nil }
      return ActivationCandidate(m, v.context.entitlement(m))
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
