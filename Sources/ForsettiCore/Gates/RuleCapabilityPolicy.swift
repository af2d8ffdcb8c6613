/// The capability policy of a `PolicyFile`. The rule: the first rule, in file order, that names
/// both the capability and the module decides; when none does, the file's default decides.
public struct RuleCapabilityPolicy: CapabilityPolicy, Equatable {
  /// What decided one capability for one module: a rule (its 1-based number) or the default.
  public struct Decision: Sendable, Equatable {
    public var effect: PolicyFile.Effect
    /// 1-based, as the operator counts the rules; nil when the default decided.
    public var ruleNumber: Int?
    public var rule: PolicyFile.Rule?

    public init(effect: PolicyFile.Effect, ruleNumber: Int?, rule: PolicyFile.Rule?) {
      self.effect = effect
      self.ruleNumber = ruleNumber
      self.rule = rule
    }
  }

  public var file: PolicyFile

  public init(_ file: PolicyFile) { self.file = file }

  /// The rule function: which rule decides `capability` for `moduleID`, and what it says.
  public func decision(moduleID: String, capability: Capability) -> Decision {
    for (offset, rule) in file.rules.enumerated()
    where rule.matches(moduleID: moduleID, capability: capability) {
      return Decision(effect: rule.effect, ruleNumber: offset + 1, rule: rule)
    }
    return Decision(effect: file.defaultEffect, ruleNumber: nil, rule: nil)
  }

  public func allows(moduleID: String, capability: Capability) -> Bool {
    decision(moduleID: moduleID, capability: capability).effect == .allow
  }

  public var name: String {
    "file \(file.path) (\(file.rules.count) rule\(file.rules.count == 1 ? "" : "s"), default \(file.defaultEffect.rawValue))"
  }

  /// Names the deciding rule of each denied capability, so the trace says which line to change:
  /// "networking denied by policy file /etc/forsetti/policy.json rule 3 (deny networking for
  /// com.acme.*)". Capabilities denied by one rule are named together, in rule order.
  public func denial(moduleID: String, capabilities: [Capability]) -> String {
    var groups: [(decision: Decision, caps: [Capability])] = []
    for cap in capabilities {
      let d = decision(moduleID: moduleID, capability: cap)
      if let i = groups.firstIndex(where: { $0.decision.ruleNumber == d.ruleNumber }) {
        groups[i].caps.append(cap)
      } else {
        groups.append((d, [cap]))
      }
    }
    groups.sort { ($0.decision.ruleNumber ?? Int.max) < ($1.decision.ruleNumber ?? Int.max) }
    return groups.map { g in
      let caps = g.caps.map(\.rawValue).joined(separator: ", ")
      let by =
        switch (g.decision.ruleNumber, g.decision.rule) {
        case (let n?, let rule?): "rule \(n) (\(rule))"
        default: "its default (deny; no rule names \(g.caps.count == 1 ? "it" : "them") for \(moduleID))"
        }
      return "\(caps) denied by policy file \(file.path) \(by)"
    }.joined(separator: "; ")
  }
}
