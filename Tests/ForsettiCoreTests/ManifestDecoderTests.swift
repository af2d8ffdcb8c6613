import ForsettiCore
import ForsettiTestSupport
import Testing

private typealias Fixture = ManifestFixture

/// The issues of the base manifest with `overrides`.
private func issues(_ overrides: [(String, JSONValue?)]) -> [ManifestIssue] {
  Fixture(overrides).issues
}

/// The issues of a raw manifest text.
private func issues(text: String) -> [ManifestIssue] {
  if case .failure(.invalid(let e)) = ManifestDecoder.decode(bytes: Array(text.utf8)) { return e.issues }
  return []
}

private func issue(_ field: String, _ problem: ManifestIssue.Problem) -> ManifestIssue {
  ManifestIssue(field: field, problem: problem)
}

@Suite("ManifestDecoder: valid manifests")
struct ManifestDecoderValidTests {
  @Test("the base manifest decodes into typed values")
  func base() throws {
    let m = try Fixture().manifest()
    #expect(m.schemaVersion == "1.0")
    #expect(m.manifestTemplateVersion == nil)
    #expect(m.effectiveTemplateVersion == "1.0")
    #expect(m.moduleID == "com.example.notes")
    #expect(m.displayName == "Notes")
    #expect(m.moduleVersion == SemanticVersion(1, 2, 3))
    #expect(m.moduleType == .ui)
    #expect(m.supportedPlatforms == [.linux, .macOS])
    #expect(m.minForsettiVersion == SemanticVersion(0, 1, 0))
    #expect(m.maxForsettiVersion == nil)
    #expect(m.capabilitiesRequested == [.toolbarItems, .storage])
    #expect(m.iapProductID == nil)
    #expect(m.entryPoint == "notes_module_entry")
    #expect(m.defaultModuleRole == nil)
    #expect(m.runtimeRequirements == nil)
  }

  @Test("a hand-written manifest in the reference's shape decodes")
  func referenceShape() throws {
    let text = """
      {
        "schemaVersion": "1.0",
        "moduleID": "com.example.product.module",
        "displayName": "Example Module",
        "moduleVersion": { "major": 1, "minor": 0, "patch": 0 },
        "moduleType": "ui",
        "supportedPlatforms": ["iOS", "macOS", "linux"],
        "minForsettiVersion": { "major": 0, "minor": 1, "patch": 0 },
        "maxForsettiVersion": null,
        "capabilitiesRequested": ["toolbar_items", "view_injection"],
        "iapProductID": null,
        "entryPoint": "ExampleModule"
      }
      """
    let m = try ManifestDecoder.decode(bytes: Array(text.utf8)).get()
    #expect(m.moduleID == "com.example.product.module")
    #expect(m.supportedPlatforms == [.iOS, .macOS, .linux])
    #expect(m.capabilitiesRequested == [.toolbarItems, .viewInjection])
  }

  @Test("optional fields may be absent")
  func optionalAbsent() throws {
    let m = try Fixture([
      ("maxForsettiVersion", nil), ("iapProductID", nil), ("manifestTemplateVersion", nil),
    ])
    .manifest()
    #expect(m.maxForsettiVersion == nil)
    #expect(m.iapProductID == nil)
    #expect(m.manifestTemplateVersion == nil)
  }

  @Test("optional values are read when present")
  func optionalPresent() throws {
    let m = try Fixture([
      ("manifestTemplateVersion", "1.1"), ("maxForsettiVersion", Fixture.version(2, 0, 0)),
      ("iapProductID", "com.example.notes.pro"), ("moduleType", "service"),
      ("capabilitiesRequested", ["diagnostics"]),
      ("defaultModuleRole", "diagnostics"), ("moduleVersion", Fixture.version(1, 0, 0, prerelease: "beta.2")),
    ]).manifest()
    #expect(m.manifestTemplateVersion == "1.1")
    #expect(m.usesTemplate11)
    #expect(m.maxForsettiVersion == SemanticVersion(2, 0, 0))
    #expect(m.iapProductID == "com.example.notes.pro")
    #expect(m.defaultModuleRole == .diagnostics)
    #expect(m.moduleVersion == SemanticVersion(1, 0, 0, prerelease: "beta.2"))
  }

  @Test("an empty capability list is accepted")
  func emptyCapabilities() throws {
    let m = try Fixture([("capabilitiesRequested", [])]).manifest()
    #expect(m.capabilitiesRequested.isEmpty)
  }

  @Test("schema and template versions are left for the compatibility gate to judge")
  func versionsJudgedLater() throws {
    let m = try Fixture([("schemaVersion", "2.0"), ("manifestTemplateVersion", "9.9")]).manifest()
    #expect(m.schemaVersion == "2.0")
    #expect(m.manifestTemplateVersion == "9.9")
  }

  @Test("a prerelease of null means a release")
  func nullPrerelease() throws {
    let version: JSONValue = ["major": 1, "minor": 0, "patch": 0, "prerelease": nil]
    #expect(try Fixture([("moduleVersion", version)]).manifest().moduleVersion == SemanticVersion(1, 0, 0))
  }

  @Test("max equal to min is accepted")
  func maxEqualMin() throws {
    let m = try Fixture([
      ("minForsettiVersion", Fixture.version(1, 0, 0)), ("maxForsettiVersion", Fixture.version(1, 0, 0)),
    ])
    .manifest()
    #expect(m.maxForsettiVersion == m.minForsettiVersion)
  }

  @Test(
    "valid reverse-DNS module IDs",
    arguments: [
      "com.example", "com.example.notes", "Com.Example2.my-module", "a.b", "io.x9.plug-in-", "forsettix.tool",
    ])
  func validModuleIDs(_ id: String) throws {
    #expect(try Fixture([("moduleID", .string(id))]).manifest().moduleID == id)
  }

  @Test(
    "valid C identifiers as entry points",
    arguments: ["_start", "notes_entry", "NotesEntry2", "x", "__forsetti_entry"])
  func validEntryPoints(_ name: String) throws {
    #expect(try Fixture([("entryPoint", .string(name))]).manifest().entryPoint == name)
  }
}

@Suite("ManifestDecoder: required fields and types")
struct ManifestDecoderRequiredTests {
  static let requiredFields = [
    "schemaVersion", "moduleID", "displayName", "moduleVersion", "moduleType", "supportedPlatforms",
    "minForsettiVersion", "capabilitiesRequested", "entryPoint",
  ]

  @Test("the nine root keys are the required fields")
  func rootKeys() {
    #expect(ManifestDecoder.rootKeys == Self.requiredFields)
  }

  @Test("each missing required field is reported by name", arguments: requiredFields)
  func missing(_ field: String) {
    #expect(Fixture().without(field).issues == [issue(field, .missingField)])
  }

  @Test("null counts as missing for a required field", arguments: requiredFields)
  func nullIsMissing(_ field: String) {
    #expect(Fixture([(field, .null)]).issues == [issue(field, .missingField)])
  }

  @Test("an empty object reports all nine missing fields, in field order")
  func emptyObject() {
    #expect(issues(text: "{}") == Self.requiredFields.map { issue($0, .missingField) })
  }

  struct WrongType: Sendable, CustomTestStringConvertible {
    var key: String
    var value: JSONValue
    var field: String
    var expected: String
    var found: String
    var testDescription: String { "\(field) as \(found)" }
  }

  static let wrongTypes: [WrongType] = [
    .init(
      key: "schemaVersion", value: .number("1.0"), field: "schemaVersion", expected: "string", found: "number"
    ),
    .init(key: "displayName", value: 42, field: "displayName", expected: "string", found: "number"),
    .init(
      key: "moduleID", value: ["com.example.notes"], field: "moduleID", expected: "string", found: "array"),
    .init(key: "moduleType", value: true, field: "moduleType", expected: "string", found: "boolean"),
    .init(key: "entryPoint", value: ["name": "x"], field: "entryPoint", expected: "string", found: "object"),
    .init(
      key: "capabilitiesRequested", value: "storage", field: "capabilitiesRequested",
      expected: "array of strings",
      found: "string"),
    .init(
      key: "supportedPlatforms", value: "linux", field: "supportedPlatforms", expected: "array of strings",
      found: "string"),
    .init(
      key: "supportedPlatforms", value: [1], field: "supportedPlatforms[0]", expected: "string",
      found: "number"),
    .init(
      key: "capabilitiesRequested", value: ["storage", nil], field: "capabilitiesRequested[1]",
      expected: "string",
      found: "null"),
    .init(key: "iapProductID", value: false, field: "iapProductID", expected: "string", found: "boolean"),
    .init(
      key: "manifestTemplateVersion", value: 1, field: "manifestTemplateVersion", expected: "string",
      found: "number"),
    .init(
      key: "defaultModuleRole", value: 3, field: "defaultModuleRole", expected: "string", found: "number"),
    .init(
      key: "runtimeRequirements", value: "none", field: "runtimeRequirements", expected: "object",
      found: "string"),
  ]

  @Test("wrong JSON types name the expected and found types", arguments: wrongTypes)
  func wrongType(_ c: WrongType) {
    #expect(issues([(c.key, c.value)]) == [issue(c.field, .wrongType(expected: c.expected, found: c.found))])
  }

  @Test("a document that is not an object is reported at the root")
  func rootNotObject() {
    #expect(
      issues(text: #"["schemaVersion"]"#) == [issue("(root)", .wrongType(expected: "object", found: "array"))]
    )
  }

  @Test("invalid JSON is invalidJSON, an invalid manifest is validationFailed")
  func loadErrorReasons() {
    guard case .failure(let syntax) = ManifestDecoder.decode(bytes: Array(#"{"moduleID": }"#.utf8)) else {
      Issue.record("invalid JSON decoded")
      return
    }
    #expect(syntax.reason == .invalidJSON)
    #expect(syntax.description.hasPrefix("invalid JSON at line 1, column 14"))
    guard case .failure(let invalid) = Fixture().without("entryPoint").decoded else {
      Issue.record("manifest without entryPoint decoded")
      return
    }
    #expect(invalid.reason == .validationFailed)
    #expect(invalid.description == "entryPoint: required field is missing")
  }

  @Test("looksLikeManifest needs at least one of the nine root keys")
  func looksLikeManifest() throws {
    #expect(
      ManifestDecoder.looksLikeManifest(try JSONParser.parse(#"{"name": "pkg", "version": "1.0.0"}"#))
        == false)
    #expect(ManifestDecoder.looksLikeManifest(try JSONParser.parse(#"[{"moduleID": "a.b"}]"#)) == false)
    #expect(ManifestDecoder.looksLikeManifest(try JSONParser.parse(#"{"entryPoint": "x"}"#)))
    #expect(ManifestDecoder.looksLikeManifest(try JSONParser.parse(#"{"moduleID": null}"#)))
  }
}

@Suite("ManifestDecoder: enumerations and did-you-mean")
struct ManifestDecoderEnumTests {
  @Test("unknown moduleType lists the allowed values and suggests the closest")
  func unknownModuleType() throws {
    let found = issues([("moduleType", "servce")])
    #expect(found == [issue("moduleType", .unknownValue("servce", allowed: ["service", "ui", "app"]))])
    let text = try #require(found.first).problemText
    #expect(text.contains(#"did you mean "service"?"#))
    #expect(text.contains("service, ui, app"))
  }

  @Test("a moduleType differing only in case suggests the right spelling")
  func moduleTypeCase() throws {
    let found = issues([("moduleType", "App")])
    #expect(found.map(\.field) == ["moduleType"])
    #expect(try #require(found.first).problemText.contains(#"did you mean "app"?"#))
  }

  @Test("a far-off moduleType gets no suggestion")
  func moduleTypeNoSuggestion() throws {
    let found = issues([("moduleType", "widget")])
    #expect(found == [issue("moduleType", .unknownValue("widget", allowed: ["service", "ui", "app"]))])
    #expect(try #require(found.first).problemText.contains("did you mean") == false)
  }

  @Test("an unknown capability is named with its index and the allowed raw values")
  func unknownCapability() throws {
    let found = issues([("capabilitiesRequested", ["storage", "telemetri"])])
    #expect(
      found == [
        issue(
          "capabilitiesRequested[1]", .unknownValue("telemetri", allowed: Capability.allCases.map(\.rawValue))
        )
      ])
    #expect(try #require(found.first).problemText.contains(#"did you mean "telemetry"?"#))
  }

  @Test("a Swift case name instead of the raw value suggests the raw value")
  func capabilityCaseName() throws {
    let found = issues([("capabilitiesRequested", ["secureStorage"])])
    #expect(found.map(\.field) == ["capabilitiesRequested[0]"])
    guard case .unknownValue("secureStorage", _) = try #require(found.first).problem else {
      Issue.record("expected unknownValue, got \(found)")
      return
    }
  }

  @Test("platform \"Linux\" is rejected with a hint to write \"linux\"")
  func platformCase() throws {
    let found = issues([("supportedPlatforms", ["Linux"])])
    #expect(
      found == [issue("supportedPlatforms[0]", .unknownValue("Linux", allowed: ["iOS", "macOS", "linux"]))])
    let description = try #require(found.first).description
    #expect(description.hasPrefix("supportedPlatforms[0]: "))
    #expect(description.contains(#"did you mean "linux"?"#))
  }

  @Test("platform \"ios\" suggests \"iOS\"")
  func platformIOS() throws {
    let found = issues([("supportedPlatforms", ["linux", "ios"])])
    #expect(found.map(\.field) == ["supportedPlatforms[1]"])
    #expect(try #require(found.first).problemText.contains(#"did you mean "iOS"?"#))
  }

  @Test("supportedPlatforms must list at least one platform")
  func noPlatforms() {
    #expect(issues([("supportedPlatforms", [])]) == [issue("supportedPlatforms", .emptyList)])
  }

  @Test("a platform listed twice is a duplicate")
  func duplicatePlatform() {
    #expect(
      issues([("supportedPlatforms", ["linux", "macOS", "linux"])]) == [
        issue("supportedPlatforms[2]", .duplicateValue("linux"))
      ])
  }

  @Test("a capability listed twice is a duplicate, named at its second position")
  func duplicateCapability() {
    #expect(
      issues([("capabilitiesRequested", ["storage", "storage"])])
        == [issue("capabilitiesRequested[1]", .duplicateValue("storage"))])
  }

  @Test("a blank capability is blank, not unknown")
  func blankCapability() {
    #expect(
      issues([("capabilitiesRequested", ["storage", " "])]) == [issue("capabilitiesRequested[1]", .blank)])
  }

  @Test("an unknown defaultModuleRole lists the roles")
  func unknownRole() {
    #expect(
      issues([("defaultModuleRole", "database")])
        == [
          issue(
            "defaultModuleRole",
            .unknownValue("database", allowed: DefaultModuleRole.allCases.map(\.rawValue)))
        ])
  }

  @Test("every IOKind raw value is a Capability raw value, and the kind needs that capability")
  func ioKindsAreCapabilities() {
    for kind in IOKind.allCases {
      #expect(Capability(rawValue: kind.rawValue) != nil, "\(kind.rawValue) is not a capability")
      #expect(kind.capability.rawValue == kind.rawValue)
    }
    #expect(
      IOKind.allCases.map(\.rawValue).sorted() == [
        "api", "authentication", "diagnostics", "file_export", "networking", "secure_storage", "security",
        "shared_database", "storage", "telemetry",
      ])
  }

  @Test("every service role is an I/O kind that the role can provide")
  func rolesProvideKinds() {
    for role in DefaultModuleRole.allCases where role != .ui {
      #expect(IOKind(rawValue: role.rawValue)?.providingRole == role)
      #expect(role.requiredCapability?.rawValue == role.rawValue)
    }
    #expect(DefaultModuleRole.ui.requiredCapability == nil)
  }

  @Test("there are exactly the 15 capabilities of the reference, with its raw values")
  func capabilities() {
    let reference = [
      "networking", "storage", "secure_storage", "file_export", "crypto_utilities", "telemetry",
      "routing_overlay",
      "ui_theme_mask", "toolbar_items", "view_injection", "shared_database", "authentication", "diagnostics",
      "api",
      "security",
    ]
    #expect(Capability.allCases.count == 15)
    #expect(Capability.allCases.map(\.rawValue) == reference)
    #expect(Capability.secureStorage.rawValue == "secure_storage")
    #expect(Capability.cryptoUtilities.rawValue == "crypto_utilities")
  }
}

@Suite("ManifestDecoder: versions")
struct ManifestDecoderVersionTests {
  @Test("a version written as a string is malformed, with a hint to use an object")
  func versionAsString() throws {
    let found = issues([("moduleVersion", "1.0.0")])
    #expect(found.map(\.field) == ["moduleVersion"])
    guard case .malformedVersion(let why) = try #require(found.first).problem else {
      Issue.record("expected malformedVersion, got \(found)")
      return
    }
    #expect(why.contains(#"not "1.0.0""#))
    #expect(why.contains(#"{"major","minor","patch"}"#))
  }

  @Test("a non-version string is a wrong type")
  func nonVersionString() {
    #expect(
      issues([("minForsettiVersion", "latest")])
        == [
          issue(
            "minForsettiVersion",
            .wrongType(expected: #"version object {"major","minor","patch"}"#, found: "string"))
        ])
  }

  @Test("a negative component is malformed, naming the component and the value")
  func negative() {
    let version: JSONValue = ["major": .number("-1"), "minor": 0, "patch": 0]
    #expect(
      issues([("moduleVersion", version)])
        == [issue("moduleVersion.major", .malformedVersion("expected a non-negative integer, found -1"))])
  }

  @Test("a fractional component is malformed")
  func fractional() {
    let version: JSONValue = ["major": 1, "minor": .number("1.5"), "patch": 0]
    #expect(
      issues([("moduleVersion", version)])
        == [issue("moduleVersion.minor", .malformedVersion("expected a non-negative integer, found 1.5"))])
  }

  @Test("a component written as a string is malformed")
  func stringComponent() {
    let version: JSONValue = ["major": 1, "minor": 0, "patch": "3"]
    #expect(
      issues([("moduleVersion", version)])
        == [issue("moduleVersion.patch", .malformedVersion(#"expected a non-negative integer, found "3""#))])
  }

  @Test("a missing patch is a missing field at moduleVersion.patch")
  func missingPatch() {
    let version: JSONValue = ["major": 1, "minor": 0]
    #expect(issues([("moduleVersion", version)]) == [issue("moduleVersion.patch", .missingField)])
  }

  @Test("an unknown key in a version object is not allowed")
  func unknownKey() {
    let version: JSONValue = ["major": 1, "minor": 0, "patch": 0, "build": 7]
    #expect(
      issues([("minForsettiVersion", version)])
        == [issue("minForsettiVersion.build", .notAllowed("unknown key in a version object"))])
  }

  @Test(
    "an invalid prerelease is malformed at .prerelease",
    arguments: [JSONValue.string(""), "beta..1", "01", 5])
  func badPrerelease(_ prerelease: JSONValue) {
    let version: JSONValue = ["major": 1, "minor": 0, "patch": 0, "prerelease": prerelease]
    #expect(issues([("moduleVersion", version)]).map(\.field) == ["moduleVersion.prerelease"])
  }

  @Test("maxForsettiVersion below minForsettiVersion")
  func maxBelowMin() throws {
    let found = issues([
      ("minForsettiVersion", Fixture.version(1, 0, 0)), ("maxForsettiVersion", Fixture.version(0, 9, 0)),
    ])
    #expect(found == [issue("maxForsettiVersion", .maxBelowMin(min: .init(1, 0, 0), max: .init(0, 9, 0)))])
    #expect(try #require(found.first).problemText == "maximum 0.9.0 is below the minimum 1.0.0")
  }

  @Test("a prerelease maximum is below its release minimum")
  func prereleaseMaxBelowMin() {
    let found = issues([
      ("minForsettiVersion", Fixture.version(1, 0, 0)),
      ("maxForsettiVersion", Fixture.version(1, 0, 0, prerelease: "rc.1")),
    ])
    #expect(found.map(\.field) == ["maxForsettiVersion"])
  }
}

@Suite("ManifestDecoder: identity fields")
struct ManifestDecoderIdentityTests {
  @Test("an empty moduleID is blank")
  func emptyModuleID() {
    #expect(issues([("moduleID", "")]) == [issue("moduleID", .blank)])
  }

  @Test(
    "non-reverse-DNS module IDs are rejected with the offending value",
    arguments: [
      "notes", "com.", ".com.example", "com..example", "1com.example", "com.1example", "com-x.example",
      "com.exa mple", "com.exämple", "com_example.notes", " com.example", "com.example/notes", "   ",
    ])
  func invalidModuleID(_ id: String) {
    #expect(issues([("moduleID", .string(id))]) == [issue("moduleID", .invalidModuleID(id))])
  }

  @Test(
    "the forsetti. namespace is reserved for the host", arguments: ["forsetti.core", "forsetti.internal.bus"])
  func reservedNamespace(_ id: String) throws {
    let found = issues([("moduleID", .string(id))])
    #expect(found == [issue("moduleID", .reservedNamespace(id))])
    #expect(try #require(found.first).problemText.contains("reserved"))
  }

  // Tabs and line breaks are refused first as characters of the module-text rule (below).
  @Test("blank displayName", arguments: ["", " ", "\u{3000} \u{a0}"])
  func blankDisplayName(_ name: String) {
    #expect(issues([("displayName", .string(name))]) == [issue("displayName", .blank)])
  }

  @Test("blank iapProductID is refused with a hint to use null", arguments: ["", "   "])
  func blankProduct(_ product: String) throws {
    let found = issues([("iapProductID", .string(product))])
    #expect(found.map(\.field) == ["iapProductID"])
    #expect(try #require(found.first).problemText.contains("use null for a free module"))
  }

  @Test(
    "entryPoint must be a C identifier",
    arguments: ["1start", "notes-entry", "notes entry", "notes.entry", "é_entry", "entry()", "$entry"])
  func invalidEntryPoint(_ name: String) {
    #expect(issues([("entryPoint", .string(name))]) == [issue("entryPoint", .invalidEntryPoint(name))])
  }

  @Test("an empty entryPoint is blank")
  func emptyEntryPoint() {
    #expect(issues([("entryPoint", "")]) == [issue("entryPoint", .blank)])
  }
}

@Suite("ManifestDecoder: runtimeRequirements")
struct ManifestDecoderRuntimeRequirementsTests {
  @Test("a template 1.1 runtimeRequirements block decodes completely")
  func fullBlock() throws {
    let text = """
      {
        "schemaVersion": "1.1",
        "manifestTemplateVersion": "1.1",
        "moduleID": "com.example.dashboard",
        "displayName": "Dashboard",
        "moduleVersion": { "major": 2, "minor": 0, "patch": 1 },
        "moduleType": "app",
        "supportedPlatforms": ["linux"],
        "minForsettiVersion": { "major": 0, "minor": 1, "patch": 0 },
        "capabilitiesRequested": ["telemetry", "shared_database", "toolbar_items", "routing_overlay"],
        "entryPoint": "dashboard_entry",
        "defaultModuleRole": "ui",
        "runtimeRequirements": {
          "io": [
            { "requirementID": "telemetry-events", "kind": "telemetry", "access": "emit",
              "required": true, "description": "usage events" },
            { "requirementID": "shared-notes", "kind": "shared_database", "access": "read_write",
              "required": false }
          ],
          "ui": { "controlSchemeID": "default", "layoutID": null, "themeIDs": ["dark"],
                  "viewIDs": ["chart"], "slotIDs": ["sidebar"], "toolbarItemIDs": ["refresh"],
                  "routeIDs": ["details"], "pointerIDs": ["details-pointer"] },
          "dataIsolation": { "mode": "framework_mediated_shared", "ownedStoreIDs": ["dashboard-cache"],
                             "requiredDefaultRoles": ["shared_database", "authentication"] }
        }
      }
      """
    let m = try ManifestDecoder.decode(bytes: Array(text.utf8)).get()
    #expect(m.usesTemplate11)
    #expect(m.defaultModuleRole == .ui)
    let expected = RuntimeRequirements(
      io: [
        IORequirement(
          requirementID: "telemetry-events", kind: .telemetry, access: .emit, required: true,
          description: "usage events"),
        IORequirement(
          requirementID: "shared-notes", kind: .sharedDatabase, access: .readWrite, required: false),
      ],
      ui: UIDeclarations(
        controlSchemeID: "default", layoutID: nil, themeIDs: ["dark"], viewIDs: ["chart"],
        slotIDs: ["sidebar"],
        toolbarItemIDs: ["refresh"], routeIDs: ["details"], pointerIDs: ["details-pointer"]),
      dataIsolation: DataIsolation(
        mode: .frameworkMediatedShared, ownedStoreIDs: ["dashboard-cache"],
        requiredDefaultRoles: [.sharedDatabase, .authentication]))
    #expect(m.runtimeRequirements == expected)
  }

  @Test("the ui block may be omitted, and its lists default to empty")
  func uiDefaults() throws {
    let withoutUI = try Fixture([("runtimeRequirements", Fixture.runtimeRequirements())]).manifest()
    #expect(withoutUI.runtimeRequirements == RuntimeRequirements())
    #expect(withoutUI.runtimeRequirements?.ui == nil)
    let emptyUI = try Fixture([("runtimeRequirements", Fixture.runtimeRequirements(ui: [:]))]).manifest()
    #expect(emptyUI.runtimeRequirements?.ui == UIDeclarations())
  }

  @Test("runtimeRequirements: null means none")
  func nullRequirements() throws {
    #expect(try Fixture([("runtimeRequirements", .null)]).manifest().runtimeRequirements == nil)
  }

  @Test("io and dataIsolation are required inside runtimeRequirements")
  func ioAndIsolationRequired() {
    #expect(
      issues([("runtimeRequirements", [:])])
        == [
          issue("runtimeRequirements.io", .missingField),
          issue("runtimeRequirements.dataIsolation", .missingField),
        ])
  }

  @Test("a duplicate requirementID is named at its second entry")
  func duplicateRequirementID() {
    let rr = Fixture.runtimeRequirements(io: [
      Fixture.io("events", kind: "telemetry"), Fixture.io("events", kind: "storage"),
    ])
    #expect(
      issues([("capabilitiesRequested", ["telemetry", "storage"]), ("runtimeRequirements", rr)])
        == [issue("runtimeRequirements.io[1].requirementID", .duplicateValue("events"))])
  }

  @Test("an unknown io kind lists the kinds")
  func unknownKind() throws {
    let rr = Fixture.runtimeRequirements(io: [Fixture.io("files", kind: "storag")])
    let found = issues([("runtimeRequirements", rr)])
    #expect(
      found == [
        issue(
          "runtimeRequirements.io[0].kind", .unknownValue("storag", allowed: IOKind.allCases.map(\.rawValue)))
      ])
    #expect(try #require(found.first).problemText.contains(#"did you mean "storage"?"#))
  }

  @Test("an unknown io access lists the access modes")
  func unknownAccess() {
    let rr = Fixture.runtimeRequirements(io: [Fixture.io("files", kind: "storage", access: "readwrite")])
    #expect(
      issues([("runtimeRequirements", rr)])
        == [
          issue(
            "runtimeRequirements.io[0].access",
            .unknownValue("readwrite", allowed: IOAccess.allCases.map(\.rawValue)))
        ])
  }

  @Test("each io entry needs requirementID, kind, access and required")
  func missingIOFields() {
    let entry: JSONValue = ["description": "nothing else"]
    let rr = Fixture.runtimeRequirements(io: [Fixture.io("ok", kind: "storage"), entry])
    #expect(
      issues([("runtimeRequirements", rr)]) == [
        issue("runtimeRequirements.io[1].requirementID", .missingField),
        issue("runtimeRequirements.io[1].kind", .missingField),
        issue("runtimeRequirements.io[1].access", .missingField),
        issue("runtimeRequirements.io[1].required", .missingField),
      ])
  }

  @Test("required must be a boolean and requirementID must not be blank")
  func ioFieldTypes() {
    let entry: JSONValue = ["requirementID": " ", "kind": "storage", "access": "read", "required": "yes"]
    #expect(
      issues([("runtimeRequirements", Fixture.runtimeRequirements(io: [entry]))]) == [
        issue("runtimeRequirements.io[0].requirementID", .blank),
        issue("runtimeRequirements.io[0].required", .wrongType(expected: "boolean", found: "string")),
      ])
  }

  @Test("an io entry that is not an object")
  func ioEntryNotObject() {
    #expect(
      issues([("runtimeRequirements", Fixture.runtimeRequirements(io: ["storage"]))])
        == [issue("runtimeRequirements.io[0]", .wrongType(expected: "object", found: "string"))])
  }

  @Test("dataIsolation mode and roles are checked")
  func dataIsolation() {
    #expect(
      issues([("runtimeRequirements", Fixture.runtimeRequirements(mode: "shared"))])
        == [
          issue(
            "runtimeRequirements.dataIsolation.mode",
            .unknownValue("shared", allowed: DataIsolationMode.allCases.map(\.rawValue)))
        ])
    #expect(
      issues([
        ("runtimeRequirements", Fixture.runtimeRequirements(requiredDefaultRoles: ["api", "database"]))
      ]).map(\.field)
        == ["runtimeRequirements.dataIsolation.requiredDefaultRoles[1]"])
  }

  @Test("ui ID lists hold no blanks and no duplicates")
  func uiLists() {
    let ui: JSONValue = ["viewIDs": ["chart", "chart"], "routeIDs": [""], "controlSchemeID": " "]
    #expect(
      issues([("runtimeRequirements", Fixture.runtimeRequirements(ui: ui))]) == [
        issue("runtimeRequirements.ui.controlSchemeID", .blank),
        issue("runtimeRequirements.ui.viewIDs[1]", .duplicateValue("chart")),
        issue("runtimeRequirements.ui.routeIDs[0]", .blank),
      ])
  }

  @Test("a service module with a ui block is rejected")
  func serviceWithUIBlock() throws {
    let found = issues([
      ("moduleType", "service"), ("capabilitiesRequested", ["storage"]),
      ("runtimeRequirements", Fixture.runtimeRequirements(ui: ["viewIDs": ["x"]])),
    ])
    #expect(found.map(\.field) == ["runtimeRequirements.ui"])
    guard case .notAllowed(let why) = try #require(found.first).problem else {
      Issue.record("expected notAllowed, got \(found)")
      return
    }
    #expect(why.contains("service"))
  }

  @Test("a service module without a ui block is fine")
  func serviceWithoutUIBlock() throws {
    let m = try Fixture([
      ("moduleType", "service"), ("capabilitiesRequested", ["storage"]),
      ("runtimeRequirements", Fixture.runtimeRequirements(io: [Fixture.io("files", kind: "storage")])),
    ]).manifest()
    #expect(m.runtimeRequirements?.io.map(\.requirementID) == ["files"])
  }
}

@Suite("ManifestDecoder: reporting")
struct ManifestDecoderReportingTests {
  @Test("several issues are reported at once, in field order")
  func severalIssues() throws {
    let fixture = Fixture([
      ("displayName", nil), ("supportedPlatforms", ["Linux"]),
      ("capabilitiesRequested", ["storage", "storage"]),
      ("entryPoint", "2fast"), ("moduleVersion", ["major": 1, "minor": .number("-2"), "patch": 0]),
    ])
    let found = fixture.issues
    #expect(
      found.map(\.field) == [
        "displayName", "moduleVersion.minor", "supportedPlatforms[0]", "capabilitiesRequested[1]",
        "entryPoint",
      ])
    guard case .failure(.invalid(let error)) = fixture.decoded else {
      Issue.record("expected a validation error")
      return
    }
    #expect(error.description == found.map(\.description).joined(separator: "; "))
    #expect(error.description.contains(#"entryPoint: "2fast" is not a valid C identifier"#))
  }

  @Test("field paths are plain strings a user can find in the file")
  func fieldPaths() {
    let found = issues([
      ("moduleVersion", ["major": .number("1.0"), "minor": 0, "patch": 0]),
      ("capabilitiesRequested", ["storage", "gps"]),
    ])
    #expect(found.map(\.field) == ["moduleVersion.major", "capabilitiesRequested[1]"])
    #expect(found.first?.description.hasPrefix("moduleVersion.major: malformed version: ") == true)
    #expect(found.last?.description.hasPrefix(#"capabilitiesRequested[1]: unknown value "gps""#) == true)
  }

  @Test("problem texts carry the offending value")
  func problemTexts() {
    #expect(issue("moduleID", .invalidModuleID("notes")).problemText.contains(#""notes""#))
    #expect(issue("x", .duplicateValue("storage")).problemText == #""storage" is listed more than once"#)
    #expect(
      issue("x", .wrongType(expected: "string", found: "number")).problemText
        == "expected string, found number")
    #expect(issue("x", .missingField).description == "x: required field is missing")
  }
}

/// One rule for a manifest's text (issue 40): no string a manifest holds may carry a character
/// the module-text rule escapes (`HostileText.scalars`: C0, DEL, C1, the separators, the bidi
/// controls), since every one is shown in tables, traces, prompts and the page. Each is refused,
/// naming the field, with a message that shows the value escaped (no raw character in it), on
/// the full path and on the fast path (raw UTF-8, no JSON escape). The neighbours of the classes
/// (`HostileText.kept`) are a display name like any other: the positive control.
@Suite("ManifestDecoder: the module-text rule")
struct ManifestDecoderTextRuleTests {
  static let fields: [(path: String, overrides: [(String, JSONValue?)])] = [
    ("moduleID", [("moduleID", "com.example.no\u{1b}tes")]),
    ("displayName", [("displayName", "No\u{202e}tes")]),
    ("moduleType", [("moduleType", "u\u{85}i")]),
    ("entryPoint", [("entryPoint", "notes\u{2028}entry")]),
    ("supportedPlatforms[1]", [("supportedPlatforms", ["linux", "mac\u{9b}OS"])]),
    ("capabilitiesRequested[0]", [("capabilitiesRequested", ["toolbar\r\nitems", "storage"])]),
    ("iapProductID", [("iapProductID", "com.example.pro\u{2066}")]),
  ]

  @Test(arguments: 0..<fields.count)
  func aFieldHoldingAControlIsRefusedAndTheMessageShowsItEscaped(_ i: Int) {
    let (path, overrides) = Self.fields[i]
    let found = ManifestFixture(overrides).issues
    let issue = found.first { $0.field == path }
    #expect(issue != nil, "\(path): \(found)")
    let message = found.map(\.description).joined(separator: "; ")
    #expect(HostileText.raw(in: message, allowingNewlines: false).isEmpty, "\(message)")
    #expect(message.contains("\\u{") || message.contains("\\r"), "\(message)")
  }

  @Test(arguments: HostileText.scalars)
  func everyCharacterOfTheRuleIsRefusedInADescription(_ v: UInt32) throws {
    let scalar = try #require(Unicode.Scalar(v))
    let io: JSONValue = .object(
      JSONObject([
        ("requirementID", "store"), ("kind", "storage"), ("access", "read_write"), ("required", true),
        ("description", .string("keeps \(Character(scalar)) notes")),
      ]))
    let f = ManifestFixture([
      ("schemaVersion", "1.1"), ("manifestTemplateVersion", "1.1"), ("capabilitiesRequested", ["storage"]),
      ("moduleType", "service"), ("runtimeRequirements", ManifestFixture.runtimeRequirements(io: [io])),
    ])
    let found = f.issues
    #expect(found.contains { $0.field.hasSuffix(".description") }, "U+\(String(v, radix: 16)): \(found)")
    let message = found.map(\.description).joined(separator: "; ")
    #expect(HostileText.raw(in: message, allowingNewlines: false).isEmpty, "\(message)")
    #expect(message.contains(HostileText.shown(v)), "\(message)")
  }

  /// Raw UTF-8 (what the fast path reads): refused the same; the neighbours are kept.
  @Test func theFastPathRefusesTheSameAndKeepsTheNeighbours() throws {
    let text = ManifestFixture().text
    for scalar in ["\u{85}", "\u{9b}", "\u{2028}", "\u{202e}", "\u{2069}"] {
      let hostile = text.replacingOccurrences(of: "\"Notes\"", with: "\"No\(scalar)tes\"")
      #expect(hostile != text)
      guard case .failure(.invalid(let e)) = ManifestDecoder.decode(bytes: Array(hostile.utf8)) else {
        Issue.record("\(scalar.unicodeScalars.map(\.value)) accepted")
        continue
      }
      #expect(e.issues.map(\.field) == ["displayName"], "\(e)")
    }
    let kept = text.replacingOccurrences(of: "\"Notes\"", with: "\"Notes\(HostileText.kept)\"")
    guard case .success(let m) = ManifestDecoder.decode(bytes: Array(kept.utf8)) else {
      Issue.record("the neighbours were refused")
      return
    }
    #expect(m.displayName == "Notes" + HostileText.kept)
  }
}
