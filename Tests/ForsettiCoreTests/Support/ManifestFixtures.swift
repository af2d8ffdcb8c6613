import ForsettiCore
import Testing

/// Builds manifest JSON text from a valid base manifest with overrides, so each test states only
/// the field it is about. Shared by the rule tests (not by the JSON Schema tests).
struct ManifestFixture {
  /// The document as ordered members; `text` serialises it.
  var object: JSONObject

  /// A valid template 1.0 ui manifest that requests two capabilities and is free.
  static let baseMembers: [(String, JSONValue)] = [
    ("schemaVersion", "1.0"),
    ("moduleID", "com.example.notes"),
    ("displayName", "Notes"),
    ("moduleVersion", version(1, 2, 3)),
    ("moduleType", "ui"),
    ("supportedPlatforms", ["linux", "macOS"]),
    ("minForsettiVersion", version(0, 1, 0)),
    ("maxForsettiVersion", nil),
    ("capabilitiesRequested", ["toolbar_items", "storage"]),
    ("iapProductID", nil),
    ("entryPoint", "notes_module_entry"),
  ]

  /// The base manifest.
  init() { object = JSONObject(Self.baseMembers) }

  /// The base manifest with `overrides` applied in order: a value replaces (or adds) the member,
  /// `nil` removes it. To write an explicit JSON `null`, pass `.null`.
  init(_ overrides: [(String, JSONValue?)]) {
    self.init()
    for (key, value) in overrides { object[key] = value }
  }

  /// A version object `{"major","minor","patch"}`, with `"prerelease"` when given.
  static func version(_ major: Int, _ minor: Int, _ patch: Int, prerelease: String? = nil) -> JSONValue {
    var o = JSONObject([
      ("major", .number(String(major))), ("minor", .number(String(minor))), ("patch", .number(String(patch))),
    ])
    if let prerelease { o["prerelease"] = .string(prerelease) }
    return .object(o)
  }

  /// A copy with one member replaced, added or (with `nil`) removed.
  func with(_ key: String, _ value: JSONValue?) -> ManifestFixture {
    var copy = self
    copy.object[key] = value
    return copy
  }

  /// A copy without `key`.
  func without(_ key: String) -> ManifestFixture { with(key, nil) }

  var value: JSONValue { .object(object) }

  /// The manifest as JSON text, as a module author would ship it.
  var text: String { JSONWriter.string(value, pretty: true) }

  /// Parses `text` and decodes it, the way discovery does.
  var decoded: Result<ModuleManifest, ManifestLoadError> { ManifestDecoder.decode(bytes: Array(text.utf8)) }

  /// The validation issues of this document; empty when it decodes (or is not valid JSON).
  var issues: [ManifestIssue] {
    if case .failure(.invalid(let e)) = decoded { return e.issues }
    return []
  }

  /// The decoded manifest; records a test failure when it does not decode.
  func manifest(sourceLocation: SourceLocation = #_sourceLocation) throws -> ModuleManifest {
    switch decoded {
    case .success(let m): return m
    case .failure(let e):
      Issue.record("fixture did not decode: \(e)", sourceLocation: sourceLocation)
      throw e
    }
  }

  /// A minimal valid template 1.1 `runtimeRequirements` block.
  static func runtimeRequirements(
    io: [JSONValue] = [], ui: JSONValue? = nil, mode: String = "private_to_module",
    requiredDefaultRoles: [String] = []
  ) -> JSONValue {
    var o = JSONObject([("io", .array(io))])
    if let ui { o["ui"] = ui }
    o["dataIsolation"] = .object(
      JSONObject([
        ("mode", .string(mode)), ("ownedStoreIDs", []),
        ("requiredDefaultRoles", .strings(requiredDefaultRoles)),
      ]))
    return .object(o)
  }

  /// One `runtimeRequirements.io` entry.
  static func io(_ id: String, kind: String, access: String = "read", required: Bool = true) -> JSONValue {
    .object(
      JSONObject([
        ("requirementID", .string(id)), ("kind", .string(kind)), ("access", .string(access)),
        ("required", .bool(required)),
      ]))
  }
}

/// Builds `ModuleManifest` values directly, for rules that judge typed manifests.
enum ManifestModel {
  static func make(
    _ moduleID: String = "com.example.notes", type: ModuleType = .ui, schemaVersion: String = "1.0",
    template: String? = nil, platforms: [Platform] = [.linux], version: SemanticVersion = .init(1, 2, 3),
    min: SemanticVersion = .init(0, 1, 0), max: SemanticVersion? = nil, capabilities: [Capability] = [],
    product: String? = nil, role: DefaultModuleRole? = nil, requirements: RuntimeRequirements? = nil
  ) -> ModuleManifest {
    ModuleManifest(
      schemaVersion: schemaVersion, manifestTemplateVersion: template, moduleID: moduleID,
      displayName: "Example", moduleVersion: version, moduleType: type, supportedPlatforms: platforms,
      minForsettiVersion: min, maxForsettiVersion: max, capabilitiesRequested: capabilities,
      iapProductID: product, entryPoint: "example_entry", defaultModuleRole: role,
      runtimeRequirements: requirements)
  }
}

extension GateOutcome {
  /// The reason code when the rule failed; nil when it passed.
  var failureReason: ReasonCode? { violation?.reason }
  /// The failure detail, or "" when the rule passed.
  var failureDetail: String { violation?.detail ?? "" }
}
