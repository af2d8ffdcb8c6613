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
    evaluatePreLoad(m, SharedContext(ctx), into: &trace)
  }

  /// As above, with the context boxed once for a whole batch of modules.
  static func evaluatePreLoad(_ m: ModuleManifest, _ shared: SharedContext, into trace: inout GateTrace)
    -> Bool
  {
    // Read through the shared box, not copied out of it: a copy of the context retained every
    // reference inside it, for every module.
    // One source renders every pass line of this module when (if ever) it is read.
    let subject = PreLoadSubject(manifest: m, context: shared)
    func passes(_ step: GateStep, _ outcome: GateOutcome, note: GateNote? = nil) -> Bool {
      guard let v = outcome.violation else {
        trace.pass(step, note ?? .rendered(by: subject, for: step))
        return true
      }
      trace.fail(step, v.reason, v.detail)
      trace.skipRemaining(because: "not evaluated: \(step.rawValue) failed with \(v.reason.rawValue)")
      return false
    }
    guard passes(.compatibility, shared.value.compatibility.check(m)) else { return false }
    guard passes(.approval, ApprovalRules.check(m, approvals: shared.value.approvals)) else { return false }
    // The evaluation is kept as judged: a provider need not give the same answer when asked again.
    let entitlement = shared.value.entitlement(m)
    guard passes(.entitlement, OverrideRules.check(entitlement), note: .deferred { entitlement.summary })
    else {
      return false
    }
    return passes(.runtimeRequirements, RuntimeRequirementRules.check(m, providers: shared.value.providers))
  }
}

/// A `GateContext` behind one reference, so that the many modules judged against it share it
/// instead of each holding a copy (a copy retains every array and string inside).
final class SharedContext: Sendable {
  let value: GateContext
  init(_ value: GateContext) { self.value = value }
}

/// What the pre-load pass lines of one module are rendered from.
final class PreLoadSubject: GateNoteSource {
  let manifest: ModuleManifest
  let context: SharedContext

  init(manifest: ModuleManifest, context: SharedContext) {
    self.manifest = manifest
    self.context = context
  }

  func note(for step: GateStep) -> String {
    let ctx = context.value
    switch step {
    case .compatibility: return ctx.compatibility.passDetail(manifest)
    case .approval: return ApprovalRules.passDetail(manifest, approvals: ctx.approvals)
    case .runtimeRequirements: return RuntimeRequirementRules.passDetail(manifest, providers: ctx.providers)
    default: return "passed"
    }
  }
}
