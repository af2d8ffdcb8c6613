import ForsettiCore
import Testing

/// Upstream Forsetti's activation model with ForgeAccess's default policy, with plain values.
@Suite struct ActivationRulesTests {
  static func svc(_ id: String, unlocked: Bool = false) -> ActivationCandidate {
    ActivationCandidate(moduleID: id, moduleType: .service, unlockedExplicitly: unlocked)
  }
  static func ui(_ id: String, unlocked: Bool = false) -> ActivationCandidate {
    ActivationCandidate(moduleID: id, moduleType: .ui, unlockedExplicitly: unlocked)
  }
  static func app(_ id: String, unlocked: Bool = false) -> ActivationCandidate {
    ActivationCandidate(moduleID: id, moduleType: .app, unlockedExplicitly: unlocked)
  }

  /// One row: candidates, state and policy in; the active module IDs and each inactive one's
  /// reason out.
  struct Case: Sendable, CustomTestStringConvertible {
    var name: String
    var candidates: [ActivationCandidate]
    var state = ActivationState()
    var policy = DefaultPolicy.allow
    var active: Set<String>
    var inactive: [String: ReasonCode] = [:]
    var testDescription: String { name }
  }

  static let cases: [Case] = [
    Case(
      name: "no state: every service and the first UI module by ID",
      candidates: [svc("s.one"), ui("u.b"), app("u.a"), svc("s.two")], active: ["s.one", "s.two", "u.a"],
      inactive: ["u.b": .uiNotSelected]),
    Case(
      name: "disabled beats policy allow", candidates: [svc("s"), ui("u")],
      state: .init(disabled: ["s"]), active: ["u"], inactive: ["s": .moduleDisabled]),
    Case(
      name: "disabled beats an explicit unlock under deny", candidates: [svc("s", unlocked: true)],
      state: .init(disabled: ["s"]), policy: .deny, active: [], inactive: ["s": .moduleDisabled]),
    Case(
      name: "deny: free modules only when enabled", candidates: [svc("s.on"), svc("s.off"), ui("u")],
      state: .init(enabled: ["s.on"]), policy: .deny, active: ["s.on"],
      inactive: ["s.off": .moduleDisabled, "u": .moduleDisabled]),
    Case(
      name: "deny: unlocked explicitly runs without being enabled",
      candidates: [svc("s.paid", unlocked: true), svc("s.free")], policy: .deny, active: ["s.paid"],
      inactive: ["s.free": .moduleDisabled]),
    Case(
      name: "the selected UI module wins over the first by ID", candidates: [ui("u.a"), ui("u.b"), svc("s")],
      state: .init(ui: .module("u.b")), active: ["u.b", "s"], inactive: ["u.a": .uiNotSelected]),
    Case(
      name: "a selected app module is selected like a ui one", candidates: [ui("u.a"), app("u.z")],
      state: .init(ui: .module("u.z")), active: ["u.z"], inactive: ["u.a": .uiNotSelected]),
    Case(
      name: "the selected module not eligible: the first enabled by ID", candidates: [ui("u.b"), ui("u.c")],
      state: .init(ui: .module("u.a")), active: ["u.b"], inactive: ["u.c": .uiNotSelected]),
    Case(
      name: "the selected module not enabled under deny: the first enabled by ID",
      candidates: [ui("u.a"), ui("u.b"), ui("u.c")],
      state: .init(enabled: ["u.c", "u.b"], ui: .module("u.a")),
      policy: .deny, active: ["u.b"], inactive: ["u.a": .moduleDisabled, "u.c": .uiNotSelected]),
    Case(
      name: "the first by ID skips disabled UI modules", candidates: [ui("u.a"), ui("u.b")],
      state: .init(disabled: ["u.a"]), active: ["u.b"], inactive: ["u.a": .moduleDisabled]),
    Case(
      name: "select --none: no UI module, services unaffected",
      candidates: [ui("u.a"), app("u.b"), svc("s")],
      state: .init(enabled: ["u.a"], ui: .none), active: ["s"],
      inactive: ["u.a": .uiNotSelected, "u.b": .uiNotSelected]),
    Case(
      name: "a service named as selected does not displace the UI module",
      candidates: [svc("s"), ui("u.b"), ui("u.a")], state: .init(ui: .module("s")), active: ["s", "u.a"],
      inactive: ["u.b": .uiNotSelected]),
    Case(
      name: "byte order, not case-insensitive order", candidates: [ui("a.ui"), ui("B.ui")],
      active: ["B.ui"], inactive: ["a.ui": .uiNotSelected]),
    Case(name: "nothing eligible", candidates: [], active: []),
  ]

  @Test(arguments: cases) func rule(_ c: Case) {
    let verdicts = ActivationRules.decide(c.candidates, state: c.state, defaultPolicy: c.policy)
    #expect(Set(verdicts.keys) == Set(c.candidates.map(\.moduleID)))
    #expect(Set(verdicts.filter { $0.value.isActive }.keys) == c.active)
    var inactive: [String: ReasonCode] = [:]
    for (id, v) in verdicts { if case .inactive(let code, _) = v { inactive[id] = code } }
    #expect(inactive == c.inactive)
    // Candidate order never changes the answer.
    #expect(
      ActivationRules.decide(c.candidates.reversed(), state: c.state, defaultPolicy: c.policy) == verdicts)
  }

  @Test func everyWhySaysWhatToDo() {
    let candidates = [
      Self.svc("s.free"), Self.svc("s.off"), Self.ui("u.a"), Self.ui("u.b"), Self.svc("s.on"),
    ]
    let deny = ActivationRules.decide(
      candidates, state: .init(enabled: ["u.a", "u.b", "s.on"], disabled: ["s.off"], ui: .module("u.b")),
      defaultPolicy: .deny)
    #expect(
      deny["s.free"]
        == .inactive(
          .moduleDisabled,
          "not enabled and the default policy is deny; enable with `forsetti-host enable s.free` or `forsetti-host override module s.free on`"
        ))
    #expect(
      deny["s.off"]
        == .inactive(.moduleDisabled, "disabled by the operator; enable with `forsetti-host enable s.off`"))
    #expect(deny["s.on"] == .active("enabled by the operator"))
    #expect(deny["u.b"] == .active("enabled by the operator; the selected UI module"))
    #expect(
      deny["u.a"]
        == .inactive(
          .uiNotSelected, "u.b is the selected UI module; select this one with `forsetti-host select u.a`"))

    let allow = ActivationRules.decide(
      [Self.ui("u.a"), Self.svc("s")], state: .init(), defaultPolicy: .allow)
    #expect(allow["u.a"] == .active("enabled by default (policy allow); the first enabled UI module by ID"))
    #expect(allow["s"] == .active("enabled by default (policy allow)"))
    let unlocked = ActivationRules.decide(
      [Self.svc("s", unlocked: true)], state: .init(), defaultPolicy: .deny)
    #expect(unlocked["s"] == .active("unlocked explicitly (policy deny)"))

    let none = ActivationRules.decide([Self.ui("u.a")], state: .init(ui: .none), defaultPolicy: .allow)
    #expect(
      none["u.a"]
        == .inactive(
          .uiNotSelected,
          "no UI module is selected (select --none); select one with `forsetti-host select u.a`"))

    // A fallback says why the selected module was passed over.
    func fallback(_ c: [ActivationCandidate], _ s: ActivationState) -> String {
      ActivationRules.decide(c, state: s, defaultPolicy: .allow)["u.b"]?.detail ?? ""
    }
    #expect(
      fallback([Self.ui("u.b")], .init(ui: .module("u.a")))
        .hasSuffix("the first enabled UI module by ID (the selected u.a is not eligible)"))
    #expect(
      fallback([Self.ui("u.b"), Self.ui("u.a")], .init(disabled: ["u.a"], ui: .automatic))
        == "enabled by default (policy allow); the first enabled UI module by ID")
    #expect(
      fallback([Self.ui("u.b"), Self.svc("s")], .init(ui: .module("s")))
        .hasSuffix("(the selected s is a service module)"))
    #expect(
      ActivationRules.decide(
        [Self.ui("u.a"), Self.ui("u.b")], state: .init(enabled: ["u.b"], ui: .module("u.a")),
        defaultPolicy: .deny
      )["u.b"]?.detail
        == "enabled by the operator; the first enabled UI module by ID (the selected u.a is not enabled)")
  }

  @Test func theCandidateFromTheEntitlementStep() {
    let free = ModuleManifest(moduleID: "com.v.free", displayName: "Free", moduleType: .ui, entryPoint: "f")
    let paid = ModuleManifest(
      moduleID: "com.v.paid", displayName: "Paid", moduleType: .service, iapProductID: "com.v.pro",
      entryPoint: "p")
    func evaluate(
      _ m: ModuleManifest, module: [String: OverrideState] = [:], product: [String: OverrideState] = [:]
    )
      -> EntitlementEvaluation
    {
      OverrideRules.evaluate(
        m,
        channels: OverrideChannels(
          module: [TableOverrideProvider(name: "persisted", table: module)],
          product: [TableOverrideProvider(name: "persisted", table: product)]),
        provider: StaticEntitlementProvider(unlockedProducts: ["com.v.pro"]), activeProducts: [], now: 0)
    }
    let plain = ActivationCandidate(free, evaluate(free))
    #expect(plain == ActivationCandidate(moduleID: "com.v.free", moduleType: .ui, unlockedExplicitly: false))
    #expect(ActivationCandidate(free, evaluate(free, module: ["com.v.free": .on])).unlockedExplicitly)
    #expect(ActivationCandidate(paid, evaluate(paid)).unlockedExplicitly)  // the provider unlocked it
    #expect(ActivationCandidate(paid, evaluate(paid, product: ["com.v.pro": .on])).unlockedExplicitly)
    #expect(!ActivationCandidate(paid, evaluate(paid, product: ["com.v.pro": .off])).unlockedExplicitly)
  }

  @Test func theMutationsKeepEnabledAndDisabledApart() {
    var s = ActivationState()
    s.select("u.a")
    #expect(s == ActivationState(enabled: ["u.a"], ui: .module("u.a")))
    s.disable("u.a")
    #expect(s == ActivationState(disabled: ["u.a"], ui: .automatic))  // a disabled module is not selected
    s.enable("u.a")
    #expect(s == ActivationState(enabled: ["u.a"]))
    s.select("u.b")
    s.disable("u.a")  // disabling another module keeps the selection
    #expect(s == ActivationState(enabled: ["u.b"], disabled: ["u.a"], ui: .module("u.b")))
    s.selectNone()
    #expect(s.ui == .none)
    #expect(s.enabled == ["u.b"])
  }

  @Test func theFileFormRoundTrips() throws {
    let states: [ActivationState] = [
      ActivationState(),
      ActivationState(enabled: ["b", "a", "Z"], disabled: ["c"], ui: .module("a")),
      ActivationState(disabled: ["x"], ui: .none),
    ]
    for s in states {
      let text = JSONWriter.string(s.json, pretty: true)
      #expect(ActivationState.decode(try JSONParser.parse(text)) == .success(s))
    }
    #expect(
      JSONWriter.string(states[1].json)
        == #"{"version":1,"enabled":["Z","a","b"],"disabled":["c"],"ui":{"selected":"a"}}"#)
    #expect(
      JSONWriter.string(states[0].json) == #"{"version":1,"enabled":[],"disabled":[],"ui":"automatic"}"#)
    #expect(ActivationState.decode(try JSONParser.parse(#"{"version":1}"#)) == .success(ActivationState()))
    #expect(
      ActivationState.decode(try JSONParser.parse(#"{"version":1,"ui":"none"}"#))
        == .success(.init(ui: .none)))
  }

  static let malformed: [(String, String)] = [
    (#"[]"#, "(root): expected an object, found array"),
    (#"{"enabled":[]}"#, "version: expected 1, found nothing"),
    (#"{"version":2}"#, "version: expected 1, found 2"),
    (#"{"version":"1"}"#, #"version: expected 1, found "1""#),
    (#"{"version":1,"enabled":"a"}"#, "enabled: expected an array of module IDs, found string"),
    (#"{"version":1,"enabled":["a",3]}"#, "enabled[1]: expected a non-empty module ID string, found 3"),
    (#"{"version":1,"disabled":[""]}"#, #"disabled[0]: expected a non-empty module ID string, found """#),
    (#"{"version":1,"disabled":[null]}"#, "disabled[0]: expected a non-empty module ID string, found null"),
    (
      #"{"version":1,"enabled":["a","b"],"disabled":["b"]}"#,
      #"enabled: expected no module also in disabled, found "b" in both"#
    ),
    (
      #"{"version":1,"ui":"auto"}"#,
      #"ui: expected "automatic", "none" or {"selected":"MODULE_ID"}, found "auto""#
    ),
    (
      #"{"version":1,"ui":true}"#,
      #"ui: expected "automatic", "none" or {"selected":"MODULE_ID"}, found true"#
    ),
    (
      #"{"version":1,"ui":{"select":"a"}}"#,
      #"ui: expected "automatic", "none" or {"selected":"MODULE_ID"}, found an object with select"#
    ),
    (#"{"version":1,"ui":{"selected":7}}"#, "ui.selected: expected a non-empty module ID string, found 7"),
    (
      #"{"version":1,"disabled":["a"],"ui":{"selected":"a"}}"#,
      #"ui.selected: expected a module not in disabled, found "a""#
    ),
    (
      #"{"version":1,"enable":["a"]}"#,
      #"enable: expected only version, enabled, disabled and ui (did you mean "enabled"?)"#
    ),
  ]

  @Test func eachMalformedFormIsNamed() throws {
    for (text, message) in Self.malformed {
      guard case .failure(let e) = ActivationState.decode(try JSONParser.parse(text)) else {
        Issue.record("accepted: \(text)")
        continue
      }
      #expect(e.description == message, "for \(text)")
    }
  }
}
