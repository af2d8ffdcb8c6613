import Glibc

/// Everything the pre-load gates consult, as values.
public struct GateContext: Sendable {
  public var compatibility: CompatibilityChecker
  public var approvals: ApprovalLedger
  public var entitlements: any EntitlementProvider
  public var providers: ProviderAvailability
  /// The module and product override channels, consulted before `entitlements`.
  public var overrides: OverrideChannels
  /// Products currently unlocked, for the evaluation trace.
  public var activeProducts: [String]
  /// When the gates are judged (time-frame overrides, licence expiry).
  public var now: Instant

  public init(
    compatibility: CompatibilityChecker = .init(), approvals: ApprovalLedger = .init(),
    entitlements: any EntitlementProvider = StaticEntitlementProvider(),
    providers: ProviderAvailability = .init(), overrides: OverrideChannels = .init(),
    activeProducts: [String] = [],
    now: Instant = GateContext.wallClock()
  ) {
    self.compatibility = compatibility
    self.approvals = approvals
    self.entitlements = entitlements
    self.providers = providers
    self.overrides = overrides
    self.activeProducts = activeProducts
    self.now = now
  }

  /// Seconds since 1970 now.
  public static func wallClock() -> Instant {
    var t = timespec()
    clock_gettime(CLOCK_REALTIME, &t)
    return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
  }

  /// The full entitlement evaluation of `m` (overrides, then provider).
  public func entitlement(_ m: ModuleManifest) -> EntitlementEvaluation {
    OverrideRules.evaluate(
      m, channels: overrides, provider: entitlements, activeProducts: activeProducts, now: now)
  }
}

/// Runs steps 3–6 (compatibility, approval, entitlement, runtime requirements) in contract
/// order; the first failure ends the run and later steps are recorded as skipped.
public enum GateEvaluator {
  /// Appends steps 3–6 to `trace`; returns whether all passed.
  ///
  /// Straight-line on purpose: a table of closures here copied the manifest and the context into
  /// boxes for every module, which was a quarter of gating a thousand of them.
  @discardableResult
  public static func evaluatePreLoad(_ m: ModuleManifest, _ ctx: GateContext, into trace: inout GateTrace)
    -> Bool
  {
    func passes(_ step: GateStep, _ outcome: GateOutcome, _ passDetail: @escaping @Sendable () -> String)
      -> Bool
    {
      guard let v = outcome.violation else {
        trace.pass(step, .deferred(passDetail))
        return true
      }
      trace.fail(step, v.reason, v.detail)
      trace.skipRemaining(because: "not evaluated: \(step.rawValue) failed with \(v.reason.rawValue)")
      return false
    }
    guard passes(.compatibility, ctx.compatibility.check(m), { ctx.compatibility.passDetail(m) }) else {
      return false
    }
    guard
      passes(
        .approval, ApprovalRules.check(m, approvals: ctx.approvals),
        { ApprovalRules.passDetail(m, approvals: ctx.approvals) })
    else { return false }
    let entitlement = ctx.entitlement(m)
    guard passes(.entitlement, OverrideRules.check(entitlement), { entitlement.summary }) else {
      return false
    }
    return passes(
      .runtimeRequirements, RuntimeRequirementRules.check(m, providers: ctx.providers),
      { RuntimeRequirementRules.passDetail(m, providers: ctx.providers) })
  }
}
