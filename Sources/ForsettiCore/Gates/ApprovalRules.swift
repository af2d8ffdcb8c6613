/// The Apsule approval rules as a pure function of what a module requests now and what the
/// user approved before.
///
/// - First run (nothing stored): every requested capability awaits approval.
/// - Unchanged or reduced set: nothing is asked; a reduction shrinks the stored approval at once,
///   so a capability dropped by one version and re-added later is asked for again.
/// - Added capabilities: only those are asked for; until approved they stay denied.
public enum ApprovalRules {
  /// The decision for one module.
  public static func evaluate(requested: Set<Capability>, approved: Set<Capability>?) -> ApprovalDecision {
    guard let approved else {
      return ApprovalDecision(
        granted: [], pending: requested, storedAfter: requested.isEmpty ? [] : nil, firstRun: true)
    }
    let kept = approved.intersection(requested)
    return ApprovalDecision(
      granted: kept, pending: requested.subtracting(approved), storedAfter: kept, firstRun: false)
  }

  /// Step 4 of the gate stack: blocked while any requested capability awaits approval.
  public static func check(_ m: ModuleManifest, approvals: ApprovalLedger) -> GateOutcome {
    if approvals.approveAll { return .pass }
    let decision = evaluate(requested: m.capabilitySet, approved: approvals.approved[m.moduleID])
    guard !decision.pending.isEmpty else { return .pass }
    let list = decision.pending.sorted().map(\.rawValue).joined(separator: ", ")
    // An update may run with what was approved before; only a first run waits for approval.
    guard decision.firstRun else { return .pass }
    return .fail(
      .init(
        .approvalPending,
        "first run: approval needed for \(list); approve with `forsetti-host approve \(m.moduleID)`"))
  }

  /// What a module that passed the approval gate may use: everything with `--approve-all`,
  /// otherwise what is approved and still requested.
  public static func granted(_ m: ModuleManifest, approvals: ApprovalLedger) -> Set<Capability> {
    if approvals.approveAll || m.capabilitiesRequested.isEmpty { return m.capabilitySet }
    return evaluate(requested: m.capabilitySet, approved: approvals.approved[m.moduleID]).granted
  }

  /// What a new version of a running module still needs approved before it may replace the
  /// running one: the rule above against the stored approvals (with `--approve-all`, which
  /// covers only a first start, what the running version was granted counts as approved too),
  /// for the capabilities the running version did not request — those it runs without already.
  public static func pendingUpdate(
    _ m: ModuleManifest, approvals: ApprovalLedger, running: ModuleManifest?, granted: Set<Capability>
  ) -> Set<Capability> {
    let stored = approvals.approved[m.moduleID]
    let approved = approvals.approveAll ? (stored ?? []).union(granted) : stored
    return evaluate(requested: m.capabilitySet, approved: approved).pending
      .subtracting(running?.capabilitySet ?? [])
  }

  /// The trace line of a passing module: what it may use and what still waits.
  public static func passDetail(_ m: ModuleManifest, approvals: ApprovalLedger) -> String {
    if approvals.approveAll { return "approved by --approve-all" }
    if m.capabilitiesRequested.isEmpty { return "no capabilities requested" }
    let d = evaluate(requested: m.capabilitySet, approved: approvals.approved[m.moduleID])
    if d.pending.isEmpty { return "all requested capabilities approved" }
    let pending = d.pending.sorted().map(\.rawValue).joined(separator: ", ")
    let granted = d.granted.isEmpty ? "nothing" : d.granted.sorted().map(\.rawValue).joined(separator: ", ")
    return
      "update adds \(pending), awaiting approval (denied until `forsetti-host approve \(m.moduleID)`); runs with \(granted)"
  }
}

/// What `ApprovalRules.evaluate` decided.
public struct ApprovalDecision: Sendable, Hashable {
  /// Approved and still requested: usable now.
  public var granted: Set<Capability>
  /// Requested but never approved (or approved, dropped and re-added): denied until approved.
  public var pending: Set<Capability>
  /// What the store should hold after this evaluation (reductions apply at once); nil when
  /// nothing was ever approved and nothing may be stored yet.
  public var storedAfter: Set<Capability>?
  public var firstRun: Bool
}

/// The approvals the user has given, by module ID (the content of `approvals.json`).
public struct ApprovalLedger: Sendable, Hashable {
  public var approved: [String: Set<Capability>]
  /// Development and CI: treat every requested capability as approved.
  public var approveAll: Bool

  public init(approved: [String: Set<Capability>] = [:], approveAll: Bool = false) {
    self.approved = approved
    self.approveAll = approveAll
  }

  /// Reads `{"version":1,"modules":{"<moduleID>":{"capabilities":["storage",…]}}}`.
  public static func decode(_ value: JSONValue) -> Result<ApprovalLedger, StateFileError> {
    guard let root = value.objectValue, let modules = root["modules"]?.objectValue else {
      return .failure(.malformed(field: "modules", expected: "an object keyed by module ID"))
    }
    var approved: [String: Set<Capability>] = [:]
    for (id, entry) in modules.members {
      guard let list = entry.objectValue?["capabilities"]?.arrayValue else {
        return .failure(.malformed(field: "modules.\(id).capabilities", expected: "an array of capabilities"))
      }
      var caps = Set<Capability>()
      for item in list {
        guard let raw = item.stringValue, let cap = Capability(rawValue: raw) else {
          return .failure(
            .malformed(field: "modules.\(id).capabilities", expected: "capability raw values"))
        }
        caps.insert(cap)
      }
      approved[id] = caps
    }
    return .success(ApprovalLedger(approved: approved))
  }
}

/// A state or configuration file (approvals, entitlements) that is not in its documented form.
public enum StateFileError: Error, Sendable, Hashable, CustomStringConvertible {
  case malformed(field: String, expected: String)

  public var description: String {
    switch self {
    case .malformed(let field, let expected): "\(field): expected \(expected)"
    }
  }
}
