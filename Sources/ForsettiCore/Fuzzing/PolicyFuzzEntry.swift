/// What the policy-file fuzzer does with one input, shared by the libFuzzer target (`Fuzz/`) and
/// the regression test that replays its corpus, so both run exactly the same code.
public enum PolicyFuzzEntry {
  /// Reads `bytes` as `--policy FILE` is read and returns the properties that did not hold (none
  /// on a good run). A trap inside is a finding of its own.
  public static func run(_ bytes: [UInt8]) -> [String] {
    guard let value = try? JSONParser.parse(bytes) else { return [] }
    switch PolicyFile.decode(value, path: "fuzz.json") {
    case .failure(let e):
      // A refusal says where: the top level or a rule, by number.
      let text = e.description
      return text.hasPrefix("top level") || text.hasPrefix("rule ")
        ? [] : ["refusal without a place: \(text)"]
    case .success(let file):
      return judged(RuleCapabilityPolicy(file))
    }
  }

  /// The rule function over every capability and the module IDs the file names (and ones it
  /// does not): the deciding rule matches, no earlier one does, and the trace names it.
  public static func judged(_ policy: RuleCapabilityPolicy) -> [String] {
    var broken: [String] = []
    var ids = ["com.example.none", "x"]
    for rule in policy.file.rules {
      for pattern in rule.modules {
        switch pattern {
        case .exact(let id): ids.append(id)
        case .prefix(let p): ids += [p, p + ".a", p + ".a.b"]
        case .any: break
        }
      }
    }
    for id in ids.prefix(64) {
      for cap in Capability.allCases {
        let d = policy.decision(moduleID: id, capability: cap)
        let first = policy.file.rules.firstIndex { $0.matches(moduleID: id, capability: cap) }
        if d.ruleNumber != first.map({ $0 + 1 }) {
          broken.append("not the first matching rule: \(id) \(cap)")
        }
        if d.effect != (first.map { policy.file.rules[$0].effect } ?? policy.file.defaultEffect) {
          broken.append("effect other than the deciding rule's: \(id) \(cap)")
        }
        if policy.allows(moduleID: id, capability: cap) != (d.effect == .allow) {
          broken.append("allows disagrees with the decision: \(id) \(cap)")
        }
        if d.effect == .deny, !policy.denial(moduleID: id, capabilities: [cap]).contains("fuzz.json") {
          broken.append("a denial that does not name the file: \(id) \(cap)")
        }
      }
    }
    return broken
  }
}
