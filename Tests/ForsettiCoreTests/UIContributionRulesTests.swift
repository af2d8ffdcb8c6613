import ForsettiCore
import Testing

private let uiCapabilities: [Capability] = [.toolbarItems, .viewInjection, .routingOverlay, .uiThemeMask]

/// A template 1.0 ui module with every UI capability.
private func uiModule10(capabilities: [Capability] = uiCapabilities, type: ModuleType = .ui) -> ModuleManifest
{
  ManifestModel.make(type: type, capabilities: capabilities)
}

/// A template 1.1 ui module declaring `declarations` (nil: no ui block).
private func uiModule11(_ declarations: UIDeclarations?, requirements: Bool = true) -> ModuleManifest {
  ManifestModel.make(
    type: .ui, schemaVersion: "1.1", template: "1.1", capabilities: uiCapabilities,
    requirements: requirements ? RuntimeRequirements(ui: declarations) : nil)
}

/// Declarations covering `everything`.
private let everyDeclaration = UIDeclarations(
  themeIDs: ["night"], viewIDs: ["chart"], slotIDs: ["sidebar"], toolbarItemIDs: ["refresh"],
  routeIDs: ["details", "settings"], pointerIDs: ["details-pointer"])

/// One contribution of every kind, all declared in `everyDeclaration`.
private let everything = UIContributions(
  themeMask: ThemeMask(themeID: "night", tokens: ["background": "#101820", "accent": "#FFAA00CC"]),
  toolbarItems: [ToolbarItem(itemID: "refresh", title: "Refresh", actionRouteID: "settings")],
  viewInjections: [ViewInjection(viewID: "chart", slotID: "sidebar", priority: 5)],
  overlay: OverlaySchema(routes: ["details"], pointers: ["details-pointer"]))

@Suite("UIContributionRules: capabilities")
struct UIContributionCapabilityTests {
  @Test("no contributions pass, even without capabilities or declarations")
  func empty() {
    #expect(
      UIContributionRules.check(ManifestModel.make(type: .ui, capabilities: []), UIContributions()) == .pass)
    #expect(UIContributionRules.check(uiModule11(nil, requirements: false), UIContributions()) == .pass)
    #expect(UIContributions(overlay: OverlaySchema()).isEmpty)
  }

  @Test("everything with its capabilities passes under template 1.0")
  func allCapabilities() {
    #expect(UIContributionRules.check(uiModule10(), everything) == .pass)
  }

  struct Case: Sendable, CustomTestStringConvertible {
    var capability: Capability
    var contributions: UIContributions
    var testDescription: String { capability.rawValue }
  }

  static let cases: [Case] = [
    Case(
      capability: .toolbarItems,
      contributions: UIContributions(toolbarItems: [ToolbarItem(itemID: "refresh", title: "R")])),
    Case(
      capability: .viewInjection,
      contributions: UIContributions(viewInjections: [ViewInjection(viewID: "chart", slotID: "sidebar")])),
    Case(
      capability: .routingOverlay, contributions: UIContributions(overlay: OverlaySchema(routes: ["details"]))
    ),
    Case(
      capability: .routingOverlay,
      contributions: UIContributions(overlay: OverlaySchema(pointers: ["details-pointer"]))),
    Case(capability: .uiThemeMask, contributions: UIContributions(themeMask: ThemeMask(themeID: "night"))),
  ]

  @Test("each contribution without its capability is missingCapability naming it", arguments: cases)
  func missing(_ c: Case) {
    let m = uiModule10(capabilities: uiCapabilities.filter { $0 != c.capability })
    let outcome = UIContributionRules.check(m, c.contributions)
    #expect(outcome.failureReason == .missingCapability)
    #expect(outcome.failureDetail.hasSuffix("need capability \(c.capability.rawValue)"))
    #expect(UIContributionRules.check(uiModule10(capabilities: [c.capability]), c.contributions) == .pass)
  }

  @Test("several missing capabilities are all named")
  func severalMissing() {
    let outcome = UIContributionRules.check(uiModule10(capabilities: []), everything)
    #expect(outcome.failureReason == .missingCapability)
    for cap in uiCapabilities { #expect(outcome.failureDetail.contains(cap.rawValue)) }
  }

  @Test("an app module is judged like a ui module")
  func appModule() {
    #expect(UIContributionRules.check(uiModule10(type: .app), everything) == .pass)
    #expect(
      UIContributionRules.check(uiModule10(capabilities: [], type: .app), everything).failureReason
        == .missingCapability)
  }

  @Test("a service module offering UI is refused")
  func serviceModule() {
    let outcome = UIContributionRules.check(
      ManifestModel.make(type: .service, capabilities: uiCapabilities), everything)
    #expect(outcome.failureReason == .unsatisfiedRuntimeRequirement)
    #expect(outcome.failureDetail.contains("service modules cannot contribute UI"))
  }

  @Test("a missing capability is reported before an invalid theme mask and undeclared IDs")
  func capabilityFirst() {
    let bad = UIContributions(
      themeMask: ThemeMask(themeID: "undeclared", tokens: ["x": "red"]),
      toolbarItems: [ToolbarItem(itemID: "t", title: "T")])
    let m = ManifestModel.make(
      type: .ui, schemaVersion: "1.1", template: "1.1", capabilities: [.uiThemeMask],
      requirements: RuntimeRequirements(ui: UIDeclarations()))
    #expect(UIContributionRules.check(m, bad).failureReason == .missingCapability)
  }
}

@Suite("UIContributionRules: template 1.1 declarations")
struct UIContributionDeclarationTests {
  @Test("everything declared passes")
  func allDeclared() {
    #expect(UIContributionRules.check(uiModule11(everyDeclaration), everything) == .pass)
  }

  @Test("template 1.1 without runtimeRequirements is unsatisfiedRuntimeRequirement")
  func noRequirements() {
    let outcome = UIContributionRules.check(uiModule11(nil, requirements: false), everything)
    #expect(outcome.failureReason == .unsatisfiedRuntimeRequirement)
    #expect(outcome.failureDetail.contains("runtimeRequirements.ui"))
  }

  @Test("template 1.1 with runtimeRequirements but no ui block is unsatisfiedRuntimeRequirement")
  func noUIBlock() {
    let outcome = UIContributionRules.check(uiModule11(nil), everything)
    #expect(outcome.failureReason == .unsatisfiedRuntimeRequirement)
    #expect(outcome.failureDetail.contains("must declare runtimeRequirements.ui"))
  }

  struct Undeclared: Sendable, CustomTestStringConvertible {
    var field: String
    var id: String
    var declarations: UIDeclarations
    var testDescription: String { field }
  }

  static let undeclared: [Undeclared] = {
    var toolbar = everyDeclaration
    toolbar.toolbarItemIDs = []
    var view = everyDeclaration
    view.viewIDs = ["other-view"]
    var slot = everyDeclaration
    slot.slotIDs = []
    var route = everyDeclaration
    route.routeIDs = ["settings"]
    var pointer = everyDeclaration
    pointer.pointerIDs = []
    var theme = everyDeclaration
    theme.themeIDs = ["day"]
    var action = everyDeclaration
    action.routeIDs = ["details"]
    return [
      Undeclared(field: "toolbarItemIDs", id: "refresh", declarations: toolbar),
      Undeclared(field: "viewIDs", id: "chart", declarations: view),
      Undeclared(field: "slotIDs", id: "sidebar", declarations: slot),
      Undeclared(field: "routeIDs", id: "details", declarations: route),
      Undeclared(field: "pointerIDs", id: "details-pointer", declarations: pointer),
      Undeclared(field: "themeIDs", id: "night", declarations: theme),
      // The toolbar item's action target "settings" is a route of the module, so it must be declared too.
      Undeclared(field: "routeIDs", id: "settings", declarations: action),
    ]
  }()

  @Test(
    "an undeclared contribution ID is unsatisfiedRuntimeRequirement naming ID and list", arguments: undeclared
  )
  func undeclaredID(_ c: Undeclared) {
    let outcome = UIContributionRules.check(uiModule11(c.declarations), everything)
    #expect(outcome.failureReason == .unsatisfiedRuntimeRequirement)
    #expect(outcome.failureDetail == #""\#(c.id)" is not in runtimeRequirements.ui.\#(c.field)"#)
  }

  @Test("several undeclared IDs are all named")
  func severalUndeclared() {
    let outcome = UIContributionRules.check(uiModule11(UIDeclarations()), everything)
    #expect(outcome.failureReason == .unsatisfiedRuntimeRequirement)
    #expect(outcome.failureDetail.components(separatedBy: "; ").count == 7)
  }

  @Test("template 1.0 needs no declarations")
  func template10() {
    let m = ManifestModel.make(
      type: .ui, capabilities: uiCapabilities, requirements: RuntimeRequirements(ui: UIDeclarations()))
    #expect(UIContributionRules.check(m, everything) == .pass)
    #expect(UIContributionRules.check(uiModule10(), everything) == .pass)
  }

  @Test("schema 1.0 with template 1.1 uses the template 1.1 rules")
  func schema10Template11() {
    let m = ManifestModel.make(type: .ui, schemaVersion: "1.0", template: "1.1", capabilities: uiCapabilities)
    #expect(UIContributionRules.check(m, everything).failureReason == .unsatisfiedRuntimeRequirement)
  }
}

@Suite("UIContributionRules: theme masks")
struct ThemeMaskTests {
  private static func check(_ mask: ThemeMask) -> GateOutcome {
    UIContributionRules.check(uiModule10(), UIContributions(themeMask: mask))
  }

  @Test(
    "valid #RRGGBB and #RRGGBBAA colours pass", arguments: ["#000000", "#1e2A3b", "#FFFFFFFF", "#10182080"])
  func validColours(_ colour: String) {
    #expect(Self.check(ThemeMask(themeID: "night", tokens: ["background": colour])) == .pass)
  }

  @Test(
    "invalid colours are validationFailed naming token and value",
    arguments: [
      "red", "#FFF", "#FFFF", "FFFFFF", "#GGGGGG", "#12345", "#1234567", "#123456789", "", "# 12345",
      "#ＦＦＦＦＦＦ",  // fullwidth letters are not hex digits of a colour
      "#١٢٣٤٥٦",  // Arabic-Indic digits likewise
    ])
  func invalidColours(_ colour: String) {
    let outcome = Self.check(ThemeMask(themeID: "night", tokens: ["accent": colour]))
    #expect(outcome.failureReason == .validationFailed, "\(colour) must be rejected")
    #expect(outcome.failureDetail.contains("themeMask token accent: \"\(colour)\""))
  }

  @Test("a blank themeID is validationFailed")
  func blankThemeID() {
    let outcome = Self.check(ThemeMask(themeID: " "))
    #expect(outcome.failureReason == .validationFailed)
    #expect(outcome.failureDetail.contains("themeID must not be blank"))
  }

  @Test("a token with an empty name is validationFailed")
  func emptyTokenName() {
    let outcome = Self.check(ThemeMask(themeID: "night", tokens: ["": "#000000"]))
    #expect(outcome.failureReason == .validationFailed)
    #expect(outcome.failureDetail.contains("empty name"))
  }

  @Test("every bad token is reported, in token order")
  func severalBadTokens() {
    let outcome = Self.check(ThemeMask(themeID: "night", tokens: ["z": "blue", "a": "#12", "m": "#123456"]))
    #expect(outcome.failureReason == .validationFailed)
    let parts = outcome.failureDetail.components(separatedBy: "; ")
    #expect(parts.count == 2)
    #expect(parts.first?.hasPrefix("themeMask token a:") == true)
    #expect(parts.last?.hasPrefix("themeMask token z:") == true)
  }
}

@Suite("IdentityRules")
struct IdentityRulesTests {
  private let manifest = ManifestModel.make("com.example.notes", type: .ui, version: .init(1, 2, 3))

  @Test("an agreeing descriptor passes")
  func agrees() {
    let d = ModuleDescriptor(moduleID: "com.example.notes", moduleType: .ui, moduleVersion: .init(1, 2, 3))
    #expect(IdentityRules.check(manifest, d) == .pass)
  }

  @Test("a different moduleID is moduleIdentityMismatch naming expected and actual")
  func moduleID() {
    let d = ModuleDescriptor(moduleID: "com.example.other", moduleType: .ui, moduleVersion: .init(1, 2, 3))
    let outcome = IdentityRules.check(manifest, d)
    #expect(outcome.failureReason == .moduleIdentityMismatch)
    #expect(
      outcome.failureDetail == #"moduleID: manifest "com.example.notes", module says "com.example.other""#)
  }

  @Test("a different moduleType is a mismatch")
  func moduleType() {
    let d = ModuleDescriptor(moduleID: "com.example.notes", moduleType: .app, moduleVersion: .init(1, 2, 3))
    let outcome = IdentityRules.check(manifest, d)
    #expect(outcome.failureReason == .moduleIdentityMismatch)
    #expect(outcome.failureDetail == "moduleType: manifest ui, module says app")
  }

  @Test("a different moduleVersion is a mismatch, prerelease included")
  func moduleVersion() {
    for version in [SemanticVersion(1, 2, 4), SemanticVersion(1, 2, 3, prerelease: "beta.1")] {
      let d = ModuleDescriptor(moduleID: "com.example.notes", moduleType: .ui, moduleVersion: version)
      let outcome = IdentityRules.check(manifest, d)
      #expect(outcome.failureReason == .moduleIdentityMismatch)
      #expect(outcome.failureDetail == "moduleVersion: manifest 1.2.3, module says \(version)")
    }
  }

  @Test("every differing field is named")
  func allFields() {
    let d = ModuleDescriptor(moduleID: "com.example.x", moduleType: .service, moduleVersion: .init(9, 9, 9))
    let outcome = IdentityRules.check(manifest, d)
    #expect(outcome.failureReason == .moduleIdentityMismatch)
    #expect(
      outcome.failureDetail.components(separatedBy: "; ").map { part in String(part.prefix { $0 != ":" }) }
        == ["moduleID", "moduleType", "moduleVersion"])
  }
}
