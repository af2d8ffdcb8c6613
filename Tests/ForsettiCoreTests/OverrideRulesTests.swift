import ForsettiCore
import Testing

/// The ForgeAccess precedence rules and time-frame edges, with plain values.
@Suite struct OverrideRulesTests {
  let paid = ModuleManifest(
    moduleID: "com.v.paid", displayName: "Paid", moduleType: .service, iapProductID: "com.v.pro",
    entryPoint: "e")
  let free = ModuleManifest(
    moduleID: "com.v.free", displayName: "Free", moduleType: .service, entryPoint: "f")
  let locked = StaticEntitlementProvider()
  let unlocked = StaticEntitlementProvider(unlockedProducts: ["com.v.pro"])

  func table(_ name: String, _ d: [String: OverrideState]) -> TableOverrideProvider {
    TableOverrideProvider(name: name, table: d)
  }

  func eval(_ m: ModuleManifest, _ c: OverrideChannels, _ p: any EntitlementProvider, at now: Instant = 100)
    -> EntitlementEvaluation
  {
    OverrideRules.evaluate(m, channels: c, provider: p, activeProducts: [], now: now)
  }

  @Test func withoutOverridesTheProviderDecides() {
    #expect(eval(paid, .init(), locked).unlocked == false)
    #expect(eval(paid, .init(), unlocked).unlocked == true)
    #expect(eval(free, .init(), locked).decidedBy == .free)
    #expect(OverrideRules.check(eval(paid, .init(), locked)).violation?.reason == .moduleLocked)
  }

  @Test func aModuleOverrideShortCircuitsTheProductCheck() {
    let c = OverrideChannels(
      module: [table("persisted", ["com.v.paid": .on])], product: [table("persisted", ["com.v.pro": .off])])
    let e = eval(paid, c, locked)
    #expect(e.unlocked)
    #expect(e.decidedBy == .moduleOverride(provider: "persisted", .on))
    #expect(e.steps.map(\.channel) == ["module"])  // the product channel was never consulted
    let off = eval(paid, OverrideChannels(module: [table("persisted", ["com.v.paid": .off])]), unlocked)
    #expect(!off.unlocked)
    #expect(
      !eval(free, OverrideChannels(module: [table("persisted", ["com.v.free": .off])]), unlocked).unlocked)
  }

  @Test func aProductOverrideBeatsTheProvider() {
    #expect(eval(paid, OverrideChannels(product: [table("persisted", ["com.v.pro": .on])]), locked).unlocked)
    #expect(
      !eval(paid, OverrideChannels(product: [table("persisted", ["com.v.pro": .off])]), unlocked).unlocked)
  }

  @Test func withinAChannelTheFirstProviderWithAnAnswerWins() {
    let c = OverrideChannels(module: [
      table("persisted", [:]), table("in-memory", ["com.v.paid": .off]),
      table("time-frame", ["com.v.paid": .on]),
    ])
    let e = eval(paid, c, unlocked)
    #expect(!e.unlocked)
    #expect(e.decidedBy == .moduleOverride(provider: "in-memory", .off))
    #expect(e.steps.map(\.provider) == ["persisted", "in-memory"])
    let persistedFirst = OverrideChannels(module: [
      table("persisted", ["com.v.paid": .on]), table("in-memory", ["com.v.paid": .off]),
    ])
    #expect(eval(paid, persistedFirst, locked).unlocked)
  }

  @Test func timeFramesIncludeTheirStartAndExcludeTheirEnd() {
    let window = TimeFrameOverrideProvider(windows: [
      "com.v.pro": [.init(state: .on, from: 1000, until: 2000)]
    ])
    let c = OverrideChannels(product: [window])
    #expect(!eval(paid, c, locked, at: 999.999).unlocked)
    #expect(eval(paid, c, locked, at: 1000).unlocked)
    #expect(eval(paid, c, locked, at: 1999.999).unlocked)
    #expect(!eval(paid, c, locked, at: 2000).unlocked)
    #expect(eval(paid, c, locked, at: 2000).decidedBy == .provider(locked.name))
    let open = TimeFrameOverrideProvider(windows: ["com.v.pro": [.init(state: .off, from: nil, until: 1500)]])
    #expect(!eval(paid, OverrideChannels(product: [open]), unlocked, at: 0).unlocked)
    #expect(eval(paid, OverrideChannels(product: [open]), unlocked, at: 1500).unlocked)
  }
}
