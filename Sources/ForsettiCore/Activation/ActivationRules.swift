/// A module that passed every gate, as the activation rule sees it.
public struct ActivationCandidate: Sendable, Hashable {
  public var moduleID: String
  public var moduleType: ModuleType
  /// Decided by the entitlement step: true when a module override forced it on, or it is a paid
  /// module unlocked (product override on or entitlement provider). False for a free module
  /// nothing forced on.
  public var unlockedExplicitly: Bool

  /// A candidate from plain values.
  public init(moduleID: String, moduleType: ModuleType, unlockedExplicitly: Bool = false) {
    self.moduleID = moduleID
    self.moduleType = moduleType
    self.unlockedExplicitly = unlockedExplicitly
  }

  /// A candidate from its manifest and the entitlement step's evaluation.
  public init(_ m: ModuleManifest, _ e: EntitlementEvaluation) {
    let explicit: Bool =
      switch e.decidedBy {
      case .free: false
      // An override `on`, a product override `on`, or the provider unlocking a paid product.
      case .moduleOverride, .productOverride, .provider: e.unlocked
      }
    self.init(moduleID: m.moduleID, moduleType: m.moduleType, unlockedExplicitly: explicit)
  }
}

/// Whether an eligible module runs, and the one-line why shown in traces and logs.
public enum ActivationVerdict: Sendable, Hashable {
  case active(String)
  /// Eligible but not running; never a failure.
  case inactive(ReasonCode, String)

  /// Whether the module runs.
  public var isActive: Bool {
    if case .active = self { return true }
    return false
  }

  /// The one-line why.
  public var detail: String {
    switch self {
    case .active(let why), .inactive(_, let why): why
    }
  }
}

/// Upstream Forsetti's activation model with ForgeAccess's default policy, as one pure function:
///
/// 1. Disabled by the operator: inactive (`moduleDisabled`).
/// 2. Enabled by the operator: enabled.
/// 3. Neither: enabled under policy `allow`; under `deny` only when unlocked explicitly.
/// 4. Of the enabled UI and app modules only one is active: none with `select --none`; else the
///    selected one when it is an enabled candidate; else the first by module ID (byte order).
///    The others are inactive (`uiNotSelected`). Services are never affected by the selection.
public enum ActivationRules {
  /// The verdict for every candidate, keyed by module ID (the first candidate of an ID counts).
  public static func decide(
    _ candidates: [ActivationCandidate], state: ActivationState, defaultPolicy: DefaultPolicy
  ) -> [String: ActivationVerdict] {
    var verdicts: [String: ActivationVerdict] = [:]
    // The enabled UI and app modules with why each is enabled, in candidate order.
    var enabledVisual: [(id: String, why: String)] = []
    for c in candidates where verdicts[c.moduleID] == nil {
      switch enablement(c, state: state, defaultPolicy: defaultPolicy) {
      case .inactive(let code, let why): verdicts[c.moduleID] = .inactive(code, why)
      case .active(let why):
        verdicts[c.moduleID] = .active(why)
        if c.moduleType.isVisual { enabledVisual.append((c.moduleID, why)) }
      }
    }
    let ids = enabledVisual.map(\.id)
    guard let firstByID = ids.min(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) else { return verdicts }
    if state.ui == .none {
      for id in ids {
        verdicts[id] = .inactive(
          .uiNotSelected,
          "no UI module is selected (select --none); select one with `forsetti-host select \(id)`")
      }
      return verdicts
    }
    let chosen: String
    let how: String
    if case .module(let selected) = state.ui, ids.contains(selected) {
      chosen = selected
      how = "the selected UI module"
    } else {
      chosen = firstByID
      let fallback = "the first enabled UI module by ID"
      if case .module(let selected) = state.ui {
        how = "\(fallback) (the selected \(selected) \(whyNotChosen(selected, candidates)))"
      } else {
        how = fallback
      }
    }
    for (id, why) in enabledVisual {
      if id == chosen {
        verdicts[id] = .active("\(why); \(how)")
      } else {
        verdicts[id] = .inactive(
          .uiNotSelected,
          "\(chosen) is the selected UI module; select this one with `forsetti-host select \(id)`")
      }
    }
    return verdicts
  }

  /// Rules 1–3 for one candidate.
  static func enablement(_ c: ActivationCandidate, state: ActivationState, defaultPolicy: DefaultPolicy)
    -> ActivationVerdict
  {
    if state.disabled.contains(c.moduleID) {
      return .inactive(
        .moduleDisabled, "disabled by the operator; enable with `forsetti-host enable \(c.moduleID)`")
    }
    if state.enabled.contains(c.moduleID) { return .active("enabled by the operator") }
    switch defaultPolicy {
    case .allow: return .active("enabled by default (policy allow)")
    case .deny:
      if c.unlockedExplicitly { return .active("unlocked explicitly (policy deny)") }
      return .inactive(
        .moduleDisabled,
        "not enabled and the default policy is deny; enable with `forsetti-host enable \(c.moduleID)` or `forsetti-host override module \(c.moduleID) on`"
      )
    }
  }

  /// Why a module named by `select` did not become the active UI module.
  private static func whyNotChosen(_ id: String, _ candidates: [ActivationCandidate]) -> String {
    guard let c = candidates.first(where: { $0.moduleID == id }) else { return "is not eligible" }
    // A visual candidate missing from the enabled ones was stopped by rules 1–3.
    return c.moduleType.isVisual ? "is not enabled" : "is a service module"
  }
}
