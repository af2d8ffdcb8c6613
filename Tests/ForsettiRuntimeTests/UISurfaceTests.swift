import CForsetti
import ForsettiCore
import ForsettiRuntime
import ForsettiTestSupport
import Testing

/// UI contributions are judged against capabilities and declarations before start, then
/// composed into the published surface with theme masks stripped.
@Suite(.onTestThreads) struct UISurfaceTests {
  static let ui = """
    static const forsetti_toolbar_item items[] = {{"t.refresh", "Refresh", "t.route"}};
    static const forsetti_view_injection views[] = {{"t.low", "main.sidebar", 1}, {"t.high", "main.sidebar", 9}};
    static const char *const routes[] = {"t.route"};
    static const forsetti_theme_token tokens[] = {{"accent", "#FF8800"}};
    static const forsetti_ui_contributions ui = {
      sizeof(forsetti_ui_contributions), items, 1, views, 2, routes, 1, NULL, 0, "t.theme", tokens, 1 };
    """

  static func fixture(_ id: String, _ entry: String) -> ModuleFixture {
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.type = "ui"
    f.prelude = ui
    f.uiContributions = "&ui"
    f.start = "fixture_log(\"start\"); return FORSETTI_OK;"
    return f
  }

  static let allCaps = ["toolbar_items", "view_injection", "routing_overlay", "ui_theme_mask"]

  static func declarations(views: String = #""t.low","t.high""#) -> String {
    #","manifestTemplateVersion":"1.1","runtimeRequirements":{"io":[],"dataIsolation":{"mode":"private_to_module"},"ui":{"#
      + #""toolbarItemIDs":["t.refresh"],"viewIDs":[\#(views)],"slotIDs":["main.sidebar"],"routeIDs":["t.route"],"themeIDs":["t.theme"]}}"#
  }

  @Test func declaredAndGrantedContributionsArePublishedWithTheThemeStripped() throws {
    let h = RuntimeHarness()
    try Self.fixture("com.test.panel", "panel_entry").install(
      in: h.dir, capabilities: Self.allCaps, manifestExtra: Self.declarations())
    let m = try h.start()
    #expect(
      h.state("com.test.panel") == .started,
      "\(String(describing: h.record("com.test.panel")?.trace.firstFailure))")
    let s = m.surface
    #expect(s.toolbarItems.map(\.item.itemID) == ["t.refresh"])
    #expect(s.viewInjections.map(\.view.viewID) == ["t.high", "t.low"])  // priority high to low
    #expect(s.routes == ["t.route"])
    #expect(s.strippedThemeID == "t.theme")
    #expect(s.json.objectValue?["themeMask"] == .null)
    m.stopAll()
    #expect(m.surface.toolbarItems.isEmpty)
  }

  @Test func aContributionWithoutItsCapabilityIsMissingCapability() throws {
    let h = RuntimeHarness()
    try Self.fixture("com.test.nocap", "nocap_entry").install(
      in: h.dir, capabilities: ["toolbar_items", "routing_overlay", "ui_theme_mask"],
      manifestExtra: Self.declarations())
    let m = try h.start()
    #expect(h.state("com.test.nocap") == .failed(.missingCapability))
    #expect(h.record("com.test.nocap")?.trace.firstFailure?.detail.contains("view_injection") == true)
    #expect(!h.lines("com.test.nocap").contains("start"))  // start never ran
    #expect(m.surface.toolbarItems.isEmpty)
  }

  @Test func anUndeclaredIDIsUnsatisfiedRuntimeRequirement() throws {
    let h = RuntimeHarness()
    try Self.fixture("com.test.undeclared", "undeclared_entry").install(
      in: h.dir, capabilities: Self.allCaps, manifestExtra: Self.declarations(views: #""t.low""#))
    let m = try h.start()
    #expect(h.state("com.test.undeclared") == .failed(.unsatisfiedRuntimeRequirement))
    #expect(
      h.record("com.test.undeclared")?.trace.firstFailure?.detail.contains(
        "\"t.high\" is not in runtimeRequirements.ui.viewIDs") == true)
    #expect(!h.lines("com.test.undeclared").contains("start"))
    #expect(m.surface.viewInjections.isEmpty)
  }
}
