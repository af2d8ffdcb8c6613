import ForsettiCore
import ForsettiTestSupport
import Testing

/// The policy fuzzer's kept inputs (Fuzz/Corpus/policy, Fuzz/Regressions/policy), replayed
/// through its entry: a policy file never traps, a refusal names its place, and the first
/// matching rule decides.
@Suite struct PolicyFuzzRegressionTests {
  static func inputs(_ folder: String) -> [String] { FuzzInputs.paths(folder, "policy") }

  @Test func theSeedCorpusIsThere() {
    #expect(Self.inputs("Corpus").count >= 3, "Fuzz/Corpus/policy holds policy files")
  }

  @Test(arguments: inputs("Corpus") + inputs("Regressions"))
  func replays(_ path: String) throws {
    let bytes = try #require(PlainFiles.contents(of: path), "\(path) is readable")
    #expect(PolicyFuzzEntry.run(bytes) == [], "\(path)")
  }

  /// The entry's properties catch a policy whose rule function is wrong: the positive control.
  @Test func theEntryNoticesAWrongDecision() throws {
    let file = PolicyFile(
      path: "elsewhere.json", defaultEffect: .deny,
      rules: [.init(effect: .allow, capabilities: [.storage], modules: [.any])])
    let broken = PolicyFuzzEntry.judged(RuleCapabilityPolicy(file))
    #expect(broken.contains { $0.hasPrefix("a denial that does not name the file") }, "\(broken)")
  }
}
