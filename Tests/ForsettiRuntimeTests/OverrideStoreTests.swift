import ForsettiCore
import ForsettiRuntime
import ForsettiTestSupport
import Foundation
import Testing

/// STATE/overrides.json as the host reads it (version 1 and 2, malformed forms), several
/// time-frame windows per ID, and the in-memory provider between the persisted one and the
/// windows, judged through the real channels and the real judge.
@Suite(.onTestThreads) struct OverrideStoreTests {
  let dir = TemporaryDirectory("overrides")
  var state: String { dir.url("state") }
  var store: OverrideStore { OverrideStore(stateDirectory: state) }

  let paid = ModuleManifest(
    moduleID: "com.v.paid", displayName: "Paid", moduleType: .service, iapProductID: "com.v.pro",
    entryPoint: "e")

  static func at(_ iso: String) throws -> Instant { try #require(Licence.parseTime(iso)) }

  func write(_ text: String) throws { try dir.write("state/overrides.json", text) }

  func loadError(_ text: String) throws -> String {
    try write(text)
    do {
      _ = try store.load()
      return "no error"
    } catch {
      return error.description
    }
  }

  @Test func aVersion1FileIsReadAndWrittenBackAsVersion2() throws {
    try write(
      """
      {"version":1,
       "modules":{"com.a":{"state":"off"},
                  "com.b":{"state":"on","from":"2027-01-01T00:00:00Z","until":"2027-02-01T00:00:00Z"},
                  "com.c":{"state":"unset"},
                  "com.d":{"state":"on","from":"2027-02-01T00:00:00Z","until":"2027-01-01T00:00:00Z"}},
       "products":{"com.v.pro":{"state":"on","until":"2030-01-01T00:00:00Z"}}}
      """)
    let v1 = try store.load()
    let expected = OverrideStore.Content(
      modules: [
        "com.a": .init(state: .off),
        "com.b": .init(windows: [
          .init(state: .on, from: "2027-01-01T00:00:00Z", until: "2027-02-01T00:00:00Z")
        ]),
      ],
      products: ["com.v.pro": .init(windows: [.init(state: .on, until: "2030-01-01T00:00:00Z")])])
    // "unset" said nothing, and a window that ends before it begins was never in effect.
    #expect(v1 == expected)
    #expect(
      try v1.edges.sorted() == [
        Self.at("2027-01-01T00:00:00Z"), Self.at("2027-02-01T00:00:00Z"), Self.at("2030-01-01T00:00:00Z"),
      ])

    try store.save(v1)
    let text = try String(contentsOfFile: store.path, encoding: .utf8)
    let doc = try #require(try JSONParser.parse(text).objectValue)
    #expect(doc["version"] == 2)
    #expect(
      doc["modules"]?.objectValue?["com.b"]
        == .object(
          JSONObject([
            (
              "windows",
              .array([
                .object(
                  JSONObject([
                    ("state", "on"), ("from", "2027-01-01T00:00:00Z"), ("until", "2027-02-01T00:00:00Z"),
                  ]))
              ])
            )
          ])))
    #expect(doc["modules"]?.objectValue?["com.c"] == nil)
    #expect(try store.load() == v1)
  }

  @Test func aVersion2FileHoldsAPersistedStateAndSeveralWindowsPerID() throws {
    let c = OverrideStore.Content(
      modules: [
        "com.a": .init(
          state: .off,
          windows: [
            .init(state: .on, from: "2027-01-01T00:00:00Z", until: "2027-01-02T00:00:00Z"),
            .init(state: .on, from: "2027-03-01T00:00:00+01:00"),
          ])
      ])
    try store.save(c)
    #expect(try store.load() == c)
    // Bounds stay as the operator wrote them.
    #expect(try String(contentsOfFile: store.path, encoding: .utf8).contains("2027-03-01T00:00:00+01:00"))
  }

  @Test func aMalformedFileIsAnErrorNamingTheFieldAndWhatWasExpected() throws {
    let cases: [(String, String)] = [
      ("{", "invalid JSON"),
      (#"{"version":3}"#, "version: 1 or 2"),
      (#"{"version":2,"modules":[]}"#, "modules: an object of IDs"),
      (#"{"version":2,"modules":{"com.a":"on"}}"#, "modules.com.a: an object with state and/or windows"),
      (#"{"version":2,"modules":{"com.a":{"state":"maybe"}}}"#, "modules.com.a.state: on, off or unset"),
      (
        #"{"version":2,"modules":{"com.a":{"state":"on","from":"2027-01-01T00:00:00Z"}}}"#,
        "modules.com.a.from: no from here in version 2"
      ),
      (#"{"version":2,"products":{"p":{"window":[]}}}"#, "products.p.window: only state and windows"),
      (
        #"{"version":2,"products":{"p":{"windows":{}}}}"#,
        "products.p.windows: an array of {state, from, until}"
      ),
      (
        #"{"version":2,"products":{"p":{"windows":[{"state":"unset","from":"2027-01-01T00:00:00Z"}]}}}"#,
        "products.p.windows[0].state: on or off"
      ),
      (
        #"{"version":2,"products":{"p":{"windows":[{"state":"on","until":"2027-01-01T00:00:00Z"},{"state":"on","from":"soon"}]}}}"#,
        "products.p.windows[1].from: an ISO 8601 instant"
      ),
      (
        #"{"version":2,"products":{"p":{"windows":[{"state":"on"}]}}}"#,
        "products.p.windows[0]: from, until or both"
      ),
      (
        #"{"version":2,"products":{"p":{"windows":[{"state":"on","from":"2027-01-02T00:00:00Z","until":"2027-01-01T00:00:00Z"}]}}}"#,
        "products.p.windows[0].until: an instant after from"
      ),
      (
        #"{"version":1,"modules":{"com.a":{"state":"on","until":7}}}"#,
        "modules.com.a.until: an ISO 8601 instant"
      ),
    ]
    for (text, message) in cases {
      let error = try loadError(text)
      #expect(error.contains(message), "\(text) → \(error)")
      #expect(error.hasPrefix(store.path), "\(error)")
    }
  }

  @Test func severalWindowsForOneIDDecideInsideThemAndNothingBetweenOrOutside() throws {
    try store.save(
      .init(
        modules: [
          "com.v.paid": .init(windows: [
            .init(state: .on, from: "2027-01-01T00:00:00Z", until: "2027-01-02T00:00:00Z"),
            .init(state: .off, from: "2027-02-01T00:00:00Z", until: "2027-02-02T00:00:00Z"),
          ])
        ]))
    let channels = OverrideStore.channels(try store.load())
    let unlocked = StaticEntitlementProvider(unlockedProducts: ["com.v.pro"])
    let locked = StaticEntitlementProvider()
    func judge(_ iso: String, _ p: any EntitlementProvider) throws -> EntitlementEvaluation {
      OverrideRules.evaluate(paid, channels: channels, provider: p, activeProducts: [], now: try Self.at(iso))
    }
    let first = try judge("2027-01-01T12:00:00Z", locked)
    #expect(first.unlocked)
    #expect(first.decidedBy == .moduleOverride(provider: "time-frame", .on))
    #expect(try judge("2027-01-01T00:00:00Z", locked).unlocked)  // from is inclusive
    #expect(try !judge("2027-01-02T00:00:00Z", locked).unlocked)  // until is exclusive
    let between = try judge("2027-01-15T00:00:00Z", locked)
    #expect(between.decidedBy == .provider(locked.name))
    let second = try judge("2027-02-01T12:00:00Z", unlocked)
    #expect(!second.unlocked)
    #expect(second.decidedBy == .moduleOverride(provider: "time-frame", .off))
    #expect(try judge("2027-03-01T00:00:00Z", unlocked).decidedBy == .provider(unlocked.name))
    #expect(try judge("2026-12-31T00:00:00Z", unlocked).unlocked)
    #expect(try store.load().edges.count == 4)
  }

  @Test func theInMemoryProviderBeatsTheWindowsAndLosesToThePersistedState() throws {
    // A window forcing the product on now, through the judge a host uses.
    try store.save(
      .init(products: ["com.v.pro": .init(windows: [.init(state: .on, until: "2999-01-01T00:00:00Z")])]))
    let memory = InMemoryOverrides()
    var config = HostConfiguration(manifestsDirectory: dir.url("manifests"), stateDirectory: state)
    config.inMemoryOverrides = memory
    func now() throws -> EntitlementEvaluation {
      try Judge(config).gateContext(discovered: [paid]).0.entitlement(paid)
    }
    #expect(try now().decidedBy == .productOverride(provider: "time-frame", .on))
    #expect(try now().unlocked)

    #expect(memory.set(channel: .product, id: "com.v.pro", state: .off) == .unset)
    var e = try now()
    #expect(!e.unlocked)
    #expect(e.decidedBy == .productOverride(provider: "in-memory", .off))
    #expect(e.steps.filter { $0.channel == "product" }.map(\.provider) == ["persisted", "in-memory"])

    // The persisted state comes first.
    var c = try store.load()
    c[.product]["com.v.pro"]?.state = .on
    try store.save(c)
    e = try now()
    #expect(e.unlocked)
    #expect(e.decidedBy == .productOverride(provider: "persisted", .on))

    // A module override in memory short-circuits the product channel; cleared, it is gone.
    memory.set(channel: .module, id: "com.v.paid", state: .off)
    #expect(try now().decidedBy == .moduleOverride(provider: "in-memory", .off))
    #expect(memory.clear(channel: .module, id: "com.v.paid") == .off)
    #expect(memory.clear(channel: .product, id: "com.v.pro") == .off)
    #expect(memory.snapshot.modules.isEmpty && memory.snapshot.products.isEmpty)
    #expect(try now().decidedBy == .productOverride(provider: "persisted", .on))
  }

  @Test func aSecondHostHasItsOwnInMemoryOverrides() throws {
    let first = HostConfiguration(manifestsDirectory: "m", stateDirectory: state)
    var copy = first
    copy.approveAll = true
    first.inMemoryOverrides.set(channel: .module, id: "com.a", state: .on)
    // A copy of one configuration shares its table; another configuration does not.
    #expect(copy.inMemoryOverrides.state(channel: .module, id: "com.a") == .on)
    let other = HostConfiguration(manifestsDirectory: "m", stateDirectory: state)
    #expect(other.inMemoryOverrides.state(channel: .module, id: "com.a") == .unset)
    // `.unset` is no override at all.
    let seeded = InMemoryOverrides(modules: ["com.a": .on, "com.b": .unset])
    #expect(seeded.snapshot.modules == ["com.a": .on])
    seeded.set(channel: .module, id: "com.a", state: .unset)
    #expect(seeded.snapshot.modules.isEmpty)
  }

  @Test func theJudgeWakesAtTheNextWindowEdge() throws {
    let soon = Date().timeIntervalSince1970 + 3600
    let later = soon + 3600
    func iso(_ t: Instant) -> String { ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: t)) }
    try store.save(
      .init(
        modules: [
          "com.v.paid": .init(windows: [
            .init(state: .on, until: "2000-01-01T00:00:00Z"), .init(state: .off, from: iso(later)),
            .init(state: .on, from: iso(soon), until: iso(later)),
          ])
        ]))
    let config = HostConfiguration(manifestsDirectory: dir.url("manifests"), stateDirectory: state)
    let next = try #require(try Judge(config).gateContext(discovered: [paid]).1)
    #expect(abs(next - soon) < 1)
  }
}
