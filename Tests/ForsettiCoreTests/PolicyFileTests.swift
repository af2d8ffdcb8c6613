import ForsettiCore
import Testing

private func decode(_ text: String, path: String = "/etc/forsetti/policy.json") throws -> Result<
  PolicyFile, PolicyFileError
> {
  PolicyFile.decode(try JSONParser.parse(Array(text.utf8)), path: path)
}

private func policy(_ text: String) throws -> RuleCapabilityPolicy {
  RuleCapabilityPolicy(try decode(text).get())
}

/// `--policy FILE`: the file's decoding and its rule (first matching rule in file order, else the
/// default).
@Suite("PolicyFile")
struct PolicyFileTests {
  static let acme = """
    {"default": "allow",
     "rules": [
       {"effect": "allow", "capabilities": ["networking"], "modules": ["com.acme.gateway"]},
       {"effect": "deny", "capabilities": ["*"], "modules": ["com.evil"]},
       {"effect": "deny", "capabilities": ["networking", "telemetry"], "modules": ["com.acme.*"]}
     ]}
    """

  @Test("the first rule that names the capability and the module decides")
  func firstMatchWins() throws {
    let p = try policy(Self.acme)
    // Rule 1 comes before rule 3, so the gateway keeps networking that rule 3 denies its siblings.
    #expect(p.decision(moduleID: "com.acme.gateway", capability: .networking).ruleNumber == 1)
    #expect(p.allows(moduleID: "com.acme.gateway", capability: .networking))
    #expect(!p.allows(moduleID: "com.acme.gateway", capability: .telemetry))
    #expect(p.decision(moduleID: "com.acme.gateway", capability: .telemetry).ruleNumber == 3)
    #expect(!p.allows(moduleID: "com.acme.crm.sync", capability: .networking))
    #expect(!p.allows(moduleID: "com.evil", capability: .storage))
  }

  @Test("no matching rule: the default decides, and it can be deny")
  func defaultDecides() throws {
    let p = try policy(Self.acme)
    let d = p.decision(moduleID: "com.example.a", capability: .networking)
    #expect(d == .init(effect: .allow, ruleNumber: nil, rule: nil))
    // A prefix pattern names what is under it, not the prefix itself nor a longer word.
    #expect(p.allows(moduleID: "com.acme", capability: .networking))
    #expect(p.allows(moduleID: "com.acmes.x", capability: .networking))
    #expect(p.allows(moduleID: "com.evil.twin", capability: .storage))
    let closed = try policy(
      #"{"default":"deny","rules":[{"effect":"allow","capabilities":["storage"],"modules":["*"]}]}"#)
    #expect(closed.allows(moduleID: "any.module", capability: .storage))
    #expect(!closed.allows(moduleID: "any.module", capability: .telemetry))
    #expect(try policy(#"{"default":"deny"}"#).file.rules.isEmpty)
  }

  @Test("the trace names the file, the deciding rule and the rule as written")
  func denialNamesTheRule() throws {
    let p = try policy(Self.acme)
    #expect(
      p.denial(moduleID: "com.acme.crm", capabilities: [.networking, .telemetry])
        == "networking, telemetry denied by policy file /etc/forsetti/policy.json rule 3 (deny networking, telemetry for com.acme.*)"
    )
    let closed = try policy(#"{"default":"deny","rules":[]}"#)
    #expect(
      closed.denial(moduleID: "com.x.y", capabilities: [.storage])
        == "storage denied by policy file /etc/forsetti/policy.json its default (deny; no rule names it for com.x.y)"
    )
    let m = ManifestModel.make(capabilities: [.storage, .networking])
    let m2 = ManifestModel.make("com.acme.crm", capabilities: [.storage, .networking])
    guard case .fail(let v) = CompatibilityChecker(policy: p).check(m2) else {
      Issue.record("expected a denial")
      return
    }
    #expect(v.reason == .capabilityDenied)
    #expect(
      v.detail
        == "networking denied by policy file /etc/forsetti/policy.json rule 3 (deny networking, telemetry for com.acme.*)"
    )
    // The positive control: the same manifest passes under the built-in allow-all.
    #expect(CompatibilityChecker().check(m) == .pass)
    #expect(CompatibilityChecker(policy: FixedCapabilityPolicy([.storage])).check(m) != .pass)
  }

  @Test(
    "a bad file is refused with the rule, the field and what would do",
    arguments: [
      (#"[]"#, "top level: expected an object, found array"),
      (#"{"rules":[]}"#, #"top level: field "default" is missing"#),
      (#"{"default":"maybe"}"#, #"top level, field "default": "maybe" is neither "allow" nor "deny""#),
      (#"{"default":"allow","rule":[]}"#, #"top level: unknown field "rule"; did you mean "rules"?"#),
      (
        #"{"default":"allow","rules":[{"effect":"deny","capabilities":["netwoking"],"modules":["*"]}]}"#,
        #"rule 1, field "capabilities": unknown capability "netwoking"; did you mean "networking"? (valid: api, authentication,"#
      ),
      (
        #"{"default":"allow","rules":[{"effect":"deny","capabilities":["*"],"modules":["*"]},{"effect":"deny","capabilities":["*"]}]}"#,
        #"rule 2: field "modules" is missing"#
      ),
      (
        #"{"default":"allow","rules":[{"effect":"deny","capabilities":["*"],"modules":["com.*.x"]}]}"#,
        #"rule 1, field "modules": "com.*.x" is not a module ID, PREFIX.* or *"#
      ),
      (
        #"{"default":"allow","rules":[{"effect":"deny","capabilities":[],"modules":["a"]}]}"#,
        #"rule 1, field "capabilities": expected a non-empty array of strings, found array"#
      ),
    ])
  func refused(text: String, message: String) throws {
    guard case .failure(let e) = try decode(text) else {
      Issue.record("accepted \(text)")
      return
    }
    #expect(e.description.hasPrefix(message), "\(e)")
  }

  @Test("every capability name the manifest knows is accepted, and listed when one is not")
  func capabilityNames() throws {
    let all = Capability.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ",")
    let p = try policy(
      #"{"default":"allow","rules":[{"effect":"deny","capabilities":[\#(all)],"modules":["m"]}]}"#)
    #expect(p.file.rules.first?.capabilities == Set(Capability.allCases))
    guard
      case .failure(let e) = try decode(
        #"{"default":"allow","rules":[{"effect":"deny","capabilities":["x"],"modules":["m"]}]}"#)
    else {
      Issue.record("accepted an unknown capability")
      return
    }
    for c in Capability.allCases { #expect(e.description.contains(c.rawValue)) }
  }
}
