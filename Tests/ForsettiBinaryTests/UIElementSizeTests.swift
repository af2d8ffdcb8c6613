import ForsettiBinary
import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

/// ABI 1.1 lets the UI element structs grow: each array carries the element size the module
/// built, the host steps by it and reads the fields it knows. A module built against the ABI 1.0
/// headers (the snapshot in Tests/Fixtures/abi-1.0, which predates the sizes) still loads.
@Suite(.onTestThreads) struct UIElementSizeTests {
  let dir = TemporaryDirectory("ui-element-size")

  /// The ABI 1.0 include tree, as it was before the element sizes were added.
  static let abi10Include = (HostBinary.packageRoot as NSString).appendingPathComponent(
    "Tests/Fixtures/abi-1.0/include")

  static let declarations =
    #","manifestTemplateVersion":"1.1","runtimeRequirements":{"io":[],"dataIsolation":{"mode":"private_to_module"},"ui":{"#
    + #""toolbarItemIDs":["t.one","t.two"],"viewIDs":["v.low","v.high"],"slotIDs":["main.sidebar"],"routeIDs":["t.route"],"themeIDs":["t.theme"]}}"#
  static let caps = ["toolbar_items", "view_injection", "routing_overlay", "ui_theme_mask"]

  /// The contributions every fixture below declares, whatever the layout of its elements.
  static let expected = UIContributions(
    themeMask: ThemeMask(themeID: "t.theme", tokens: ["accent": "#FF8800", "surface": "#101010"]),
    toolbarItems: [
      ToolbarItem(itemID: "t.one", title: "One", actionRouteID: "t.route"),
      ToolbarItem(itemID: "t.two", title: "Two", actionRouteID: nil),
    ],
    viewInjections: [
      ViewInjection(viewID: "v.low", slotID: "main.sidebar", priority: 1),
      ViewInjection(viewID: "v.high", slotID: "main.sidebar", priority: 9),
    ],
    overlay: OverlaySchema(routes: ["t.route"], pointers: []))

  /// An ABI 1.0 module: 1.0 element structs and a 1.0 `forsetti_ui_contributions`, followed in
  /// memory by words that would read as element size 1 if the host read past `struct_size`.
  static let abi10UI = """
    _Static_assert(FORSETTI_ABI_MAJOR == 1 && FORSETTI_ABI_MINOR == 0, "built against the ABI 1.0 headers");
    static const forsetti_toolbar_item items[] = {{"t.one", "One", "t.route"}, {"t.two", "Two", NULL}};
    static const forsetti_view_injection views[] = {{"v.low", "main.sidebar", 1}, {"v.high", "main.sidebar", 9}};
    static const char *const routes[] = {"t.route"};
    static const forsetti_theme_token tokens[] = {{"accent", "#FF8800"}, {"surface", "#101010"}};
    static const struct { forsetti_ui_contributions ui; size_t after[3]; } blob = {
      { sizeof(forsetti_ui_contributions), items, 2, views, 2, routes, 1, NULL, 0, "t.theme", tokens, 2 },
      { 1, 1, 1 } };
    """

  /// A module from a later minor: every element struct has grown by trailing fields whose
  /// values, read at the 1.0 stride, would show up as the wrong IDs ("WRONG…").
  static func grownUI(toolbarSize: String = "sizeof(toolbar_item_1_2)") -> String {
    """
    typedef struct { const char *item_id; const char *title; const char *action_route_id;
                     const char *tooltip; const char *icon; } toolbar_item_1_2;
    typedef struct { const char *view_id; const char *slot_id; int32_t priority; int32_t weight;
                     const char *placeholder; } view_injection_1_2;
    typedef struct { const char *name; const char *color; const char *dark_color; } theme_token_1_2;
    static const toolbar_item_1_2 items[] = {
      {"t.one", "One", "t.route", "WRONG-tooltip", "WRONG-icon"}, {"t.two", "Two", NULL, "WRONG-2", "WRONG-3"}};
    static const view_injection_1_2 views[] = {
      {"v.low", "main.sidebar", 1, 5, "WRONG-placeholder"}, {"v.high", "main.sidebar", 9, 5, "WRONG-2"}};
    static const char *const routes[] = {"t.route"};
    static const theme_token_1_2 tokens[] = {{"accent", "#FF8800", "WRONG"}, {"surface", "#101010", "WRONG"}};
    static const forsetti_ui_contributions blob_ui = {
      .struct_size = sizeof(forsetti_ui_contributions),
      .toolbar_items = (const forsetti_toolbar_item *)items, .toolbar_item_count = 2,
      .view_injections = (const forsetti_view_injection *)views, .view_injection_count = 2,
      .overlay_route_ids = routes, .overlay_route_count = 1,
      .theme_id = "t.theme", .theme_tokens = (const forsetti_theme_token *)tokens, .theme_token_count = 2,
      .toolbar_item_size = \(toolbarSize), .view_injection_size = sizeof(view_injection_1_2),
      .theme_token_size = sizeof(theme_token_1_2) };
    static const struct { forsetti_ui_contributions ui; } blob = { blob_ui };
    """
  }

  static func fixture(_ id: String, _ entry: String, ui: String) -> ModuleFixture {
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.type = "ui"
    f.prelude = ui
    f.uiContributions = "&blob.ui"
    return f
  }

  /// Compiles `f` against the headers in `include` only, as a vendor with that SDK would, into
  /// `<set>/plugins` beside its manifest in `<set>/manifests`.
  @discardableResult
  func build(_ f: ModuleFixture, include: String, set: String = "host") throws -> String {
    try dir.write(
      "\(set)/manifests/\(f.entryPoint).json", f.manifest(capabilities: Self.caps, extra: Self.declarations))
    try FileManager.default.createDirectory(
      atPath: dir.url("\(set)/plugins"), withIntermediateDirectories: true)
    return try CFixture.sharedObject(
      "\(set)/plugins/\(f.entryPoint).so", source: f.source, in: dir, extraFlags: ["-Wall", "-I", include])
  }

  /// What this host reads from the module at `path`, loaded in this process.
  func read(_ path: String, _ entry: String) throws -> Result<UIContributions?, LoadError> {
    let loaded = try DynamicLoader().load(path: path, entryPoint: entry, isSwift: false).get()
    return ModuleTableReader.uiContributions(loaded)
  }

  @Test func theSnapshotIsTheABI10HeadersWithoutElementSizes() throws {
    let ui = try String(contentsOfFile: Self.abi10Include + "/forsetti/ui.h", encoding: .utf8)
    #expect(ui.contains("size_t theme_token_count;"))
    #expect(!ui.contains("toolbar_item_size"))
    let current = try String(
      contentsOfFile: ModuleFixture.includeDirectory + "/forsetti/ui.h", encoding: .utf8)
    #expect(current.contains("size_t toolbar_item_size;"))
  }

  @Test func aModuleBuiltAgainstTheABI10HeadersLoadsAndItsContributionsAreRead() throws {
    let f = Self.fixture("com.test.old", "old_ui_entry", ui: Self.abi10UI)
    let so = try build(f, include: Self.abi10Include)
    #expect(try read(so, "old_ui_entry").get() == Self.expected)
  }

  @Test func aModuleWithGrownElementsIsSteppedByItsOwnElementSize() throws {
    let f = Self.fixture("com.test.grown", "grown_ui_entry", ui: Self.grownUI())
    let so = try build(f, include: ModuleFixture.includeDirectory)
    #expect(try read(so, "grown_ui_entry").get() == Self.expected)
  }

  /// The control for the test above: the same grown arrays declared with the 1.0 element size
  /// are misread, so stepping by the module's size is what makes that test pass.
  @Test func theGrownArraysReadAtThe10StrideAreWrong() throws {
    let f = Self.fixture(
      "com.test.misdeclared", "misdeclared_ui_entry",
      ui: Self.grownUI(toolbarSize: "sizeof(forsetti_toolbar_item)"))
    let so = try build(f, include: ModuleFixture.includeDirectory)
    let got = try read(so, "misdeclared_ui_entry").get()
    #expect(got?.toolbarItems.map(\.itemID) != ["t.one", "t.two"])
  }

  @Test(arguments: [
    ("16", "toolbar_item_size 16 is below the ABI 1.0 size of forsetti_toolbar_item (24 bytes)"),
    ("4104", "toolbar_item_size 4104 is above 4096 bytes"),
    ("28", "toolbar_item_size 28 is not a multiple of the alignment of forsetti_toolbar_item (8)"),
    ("(size_t)-8", "toolbar_item_size 18446744073709551608 is above 4096 bytes"),
  ])
  func anImplausibleElementSizeIsRefusedNamingTheField(size: String, message: String) throws {
    let entry = "bad_size_" + String(size.unicodeScalars.filter { CharacterSet.alphanumerics.contains($0) })
    let f = Self.fixture("com.test.badsize", entry, ui: Self.grownUI(toolbarSize: size))
    let so = try build(f, include: ModuleFixture.includeDirectory)
    guard case .failure(let e) = try read(so, entry) else {
      Issue.record("element size \(size) was accepted")
      return
    }
    #expect(e.reason == .validationFailed)
    #expect(e.description.contains(message), "\(e.description)")
    #expect(e.description.contains("set it to sizeof(forsetti_toolbar_item)"))
  }

  /// The surface a host publishes while running the modules of `set` in confined workers (the
  /// default of `forsetti-host run`): the worker reads the arrays, the host publishes them.
  func publishedSurface(_ set: String) throws -> JSONObject? {
    let state = dir.url("\(set)/state")
    let host = Process()
    host.executableURL = URL(fileURLWithPath: HostBinary.path)
    host.arguments = [
      "run", "--manifests", dir.url("\(set)/manifests"), "--plugins", dir.url("\(set)/plugins"), "--state",
      state, "--approve-all",
    ]
    let log = dir.url("\(set)/host.log")
    _ = FileManager.default.createFile(atPath: log, contents: nil)
    host.standardOutput = FileHandle(forWritingAtPath: log)
    host.standardError = host.standardOutput
    try host.run()
    defer {
      host.terminate()
      host.waitUntilExit()
    }
    // Started means the worker read the arrays and the host published them.
    let moduleID = set == "abi-1.0" ? "com.test.old" : "com.test.grown"
    let wait = LiveHost.wait(
      stateDirectory: state, pid: host.processIdentifier, for: [moduleID: "started"],
      isRunning: { host.isRunning })
    guard wait.reached else {
      Issue.record("the host said: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
      return nil
    }
    let r = try HostBinary.run(["surface", "--state", state, "--json"])
    // Said when it fails: a loaded CI run once had `surface` fail here, and only "nil" to show.
    if r.status != 0 { Issue.record("surface exited \(r.status): \(r.stdout)\(r.stderr)") }
    return r.status == 0 ? try JSONParser.parse(r.stdout).objectValue : nil
  }

  @Test(arguments: ["abi-1.0", "grown"])
  func inAWorkerTheModulePublishesItsContributions(_ kind: String) throws {
    if kind == "abi-1.0" {
      try build(
        Self.fixture("com.test.old", "old_ui_entry", ui: Self.abi10UI), include: Self.abi10Include, set: kind)
    } else {
      try build(
        Self.fixture("com.test.grown", "grown_ui_entry", ui: Self.grownUI()),
        include: ModuleFixture.includeDirectory,
        set: kind)
    }
    let s = try #require(try publishedSurface(kind), "the host never published the module's toolbar items")
    let items = s["toolbarItems"]?.arrayValue?.compactMap(\.objectValue) ?? []
    #expect(items.compactMap { $0["itemID"]?.stringValue } == ["t.one", "t.two"])
    #expect(items.compactMap { $0["title"]?.stringValue } == ["One", "Two"])
    let views = s["viewInjections"]?.arrayValue?.compactMap { $0.objectValue?["viewID"]?.stringValue }
    #expect(views == ["v.high", "v.low"])
    #expect(s["strippedThemeID"]?.stringValue == "t.theme")
  }
}
