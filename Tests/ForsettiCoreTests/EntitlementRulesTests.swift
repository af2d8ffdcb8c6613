import ForsettiCore
import Synchronization
import Testing

/// Records what it was asked, to show the rule passes the product and module through.
private final class RecordingProvider: EntitlementProvider {
  let asked = Mutex<[(productID: String, moduleID: String)]>([])
  let answer: Bool
  init(answer: Bool) { self.answer = answer }
  func isUnlocked(productID: String, moduleID: String) -> Bool {
    asked.withLock { $0.append((productID, moduleID)) }
    return answer
  }
  var name: String { "recording" }
}

@Suite("EntitlementRules")
struct EntitlementRulesTests {
  @Test("a null product is unlocked without asking the provider")
  func freeModule() {
    let provider = RecordingProvider(answer: false)
    #expect(EntitlementRules.check(ManifestModel.make(product: nil), provider: provider) == .pass)
    #expect(provider.asked.withLock { $0.isEmpty })
    #expect(
      EntitlementRules.passDetail(ManifestModel.make(product: nil), provider: provider)
        == "free module (no iapProductID)")
  }

  @Test("a free module passes even with a provider that unlocks nothing")
  func freeWithEmptyStatic() {
    #expect(
      EntitlementRules.check(ManifestModel.make(product: nil), provider: StaticEntitlementProvider()) == .pass
    )
  }

  @Test("an unlocked product passes")
  func unlocked() {
    let provider = StaticEntitlementProvider(unlockedProducts: ["com.example.notes.pro"])
    let m = ManifestModel.make(product: "com.example.notes.pro")
    #expect(EntitlementRules.check(m, provider: provider) == .pass)
    #expect(EntitlementRules.passDetail(m, provider: provider).contains(#""com.example.notes.pro""#))
  }

  @Test("a locked product is moduleLocked naming the product and the provider")
  func locked() {
    let provider = StaticEntitlementProvider(unlockedProducts: ["com.example.other.pro"])
    let outcome = EntitlementRules.check(
      ManifestModel.make(product: "com.example.notes.pro"), provider: provider)
    #expect(outcome.failureReason == .moduleLocked)
    #expect(outcome.failureDetail.contains(#"product "com.example.notes.pro" is not unlocked"#))
    #expect(outcome.failureDetail.contains("static (1 unlocked)"))
  }

  @Test("product IDs match exactly")
  func exactMatch() {
    let provider = StaticEntitlementProvider(unlockedProducts: ["com.example.notes.pro"])
    #expect(
      EntitlementRules.check(ManifestModel.make(product: "com.example.notes.PRO"), provider: provider)
        .failureReason == .moduleLocked)
    #expect(
      EntitlementRules.check(ManifestModel.make(product: "com.example.notes"), provider: provider)
        .failureReason == .moduleLocked)
  }

  @Test("the provider is asked about this product for this module")
  func providerArguments() {
    let provider = RecordingProvider(answer: true)
    #expect(
      EntitlementRules.check(
        ManifestModel.make("com.example.paid", product: "com.example.paid.gold"), provider: provider) == .pass
    )
    let asked = provider.asked.withLock { $0 }
    #expect(asked.count == 1)
    #expect(asked.first?.productID == "com.example.paid.gold")
    #expect(asked.first?.moduleID == "com.example.paid")
  }

  @Test("allow-all unlocks any product")
  func allowAll() {
    #expect(
      EntitlementRules.check(ManifestModel.make(product: "anything"), provider: AllowAllEntitlementProvider())
        == .pass)
  }
}

@Suite("StaticEntitlementProvider.decode")
struct StaticEntitlementDecodeTests {
  @Test("a well-formed file decodes to its product set")
  func good() throws {
    let value = try JSONParser.parse(
      #"{"unlockedProducts": ["com.example.notes.pro", "com.example.gold", "com.example.gold"]}"#)
    let provider = try StaticEntitlementProvider.decode(value).get()
    #expect(provider.unlockedProducts == ["com.example.notes.pro", "com.example.gold"])
    #expect(provider.isUnlocked(productID: "com.example.gold", moduleID: "any.module"))
    #expect(!provider.isUnlocked(productID: "com.example.silver", moduleID: "any.module"))
  }

  @Test("an empty list unlocks nothing")
  func empty() throws {
    #expect(
      try StaticEntitlementProvider.decode(try JSONParser.parse(#"{"unlockedProducts": []}"#)).get()
        .unlockedProducts.isEmpty)
  }

  @Test(
    "a file without an unlockedProducts array is malformed",
    arguments: [
      #"{}"#, #"{"unlockedProducts": "com.example.pro"}"#, #"{"unlocked": []}"#, #"["com.example.pro"]"#,
    ])
  func missingList(_ text: String) throws {
    let result = StaticEntitlementProvider.decode(try JSONParser.parse(text))
    guard case .failure(let error) = result else {
      Issue.record("decoded \(text)")
      return
    }
    #expect(error == .malformed(field: "unlockedProducts", expected: "an array of product IDs"))
  }

  @Test("entries must be non-empty strings", arguments: [#""""#, "1", "null", #"{"id": "x"}"#])
  func badEntry(_ item: String) throws {
    let result = StaticEntitlementProvider.decode(
      try JSONParser.parse(#"{"unlockedProducts": ["com.example.pro", \#(item)]}"#))
    guard case .failure(let error) = result else {
      Issue.record("decoded entry \(item)")
      return
    }
    #expect(error == .malformed(field: "unlockedProducts", expected: "non-empty strings"))
    #expect(error.description == "unlockedProducts: expected non-empty strings")
  }
}
