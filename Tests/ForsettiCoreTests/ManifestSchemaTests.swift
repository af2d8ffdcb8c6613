import ForsettiCore
import Foundation
import Testing

/// The editor schema `manifests/schema/forsetti-manifest.schema.json` against `ManifestDecoder`,
/// the authority: shipped manifests, one-change invalid manifests and valid variations must get
/// the same verdict from both, and the known gaps between them are pinned down explicitly.
@Suite struct ManifestSchemaTests {
  // MARK: the schema itself

  @Test func schemaUsesOnlySupportedKeywords() throws {
    let validator = try Fixture.validator()
    #expect(validator.schemaErrors == [])
  }

  @Test func everySchemaPropertyHasADescription() throws {
    var missing: [String] = []
    func walk(_ v: JSONValue, _ path: String) {
      switch v {
      case .object(let o):
        if let props = o["properties"]?.objectValue {
          for (name, p) in props.members where p.objectValue?["description"]?.stringValue?.isEmpty != false {
            missing.append("\(path)/properties/\(name)")
          }
        }
        for (k, child) in o.members { walk(child, "\(path)/\(k)") }
      case .array(let a):
        for (i, child) in a.enumerated() { walk(child, "\(path)/\(i)") }
      default:
        break
      }
    }
    walk(try Fixture.schema(), "#")
    #expect(missing == [])
  }

  @Test func schemaEnumerationsMatchTheModel() throws {
    let s = try Fixture.schema()
    func strings(_ path: [String]) -> [String] {
      var v: JSONValue? = s
      for key in path { v = v?.objectValue?[key] }
      return v?.arrayValue?.compactMap(\.stringValue) ?? []
    }
    #expect(strings(["properties", "moduleType", "enum"]) == ModuleType.allCases.map(\.rawValue))
    #expect(
      strings(["properties", "supportedPlatforms", "items", "enum"]) == Platform.allCases.map(\.rawValue))
    #expect(strings(["$defs", "capability", "enum"]) == Capability.allCases.map(\.rawValue))
    #expect(strings(["$defs", "capability", "enum"]).count == 15)
    #expect(strings(["$defs", "defaultModuleRole", "enum"]) == DefaultModuleRole.allCases.map(\.rawValue))
    let io = ["$defs", "ioRequirement", "properties"]
    #expect(strings(io + ["kind", "enum"]) == IOKind.allCases.map(\.rawValue))
    #expect(strings(io + ["access", "enum"]) == IOAccess.allCases.map(\.rawValue))
    #expect(
      strings(["$defs", "dataIsolation", "properties", "mode", "enum"])
        == DataIsolationMode.allCases.map(\.rawValue))
    #expect(Set(strings(["required"])) == Set(ManifestDecoder.rootKeys))
  }

  // MARK: (a) shipped manifests

  @Test func shippedManifestsExist() {
    #expect(Fixture.shippedManifestNames().count >= 3)
  }

  @Test(arguments: ManifestSchemaTests.Fixture.shippedManifestNames())
  func shippedManifestIsAcceptedByBoth(_ name: String) throws {
    let bytes = try Fixture.bytes(Fixture.manifestsDirectory.appendingPathComponent(name))
    let value = try JSONParser.parse(bytes)
    #expect(try Fixture.validator().validate(value) == [])
    if case .failure(let error) = ManifestDecoder.decode(bytes: bytes) {
      Issue.record("ManifestDecoder rejects \(name): \(error)")
    }
  }

  // MARK: (b) one change each: rejected by both

  static let invalidCases: [Case] = [
    // Root shape and required fields.
    .set("root is an array", "", ["schemaVersion"], field: "(root)"),
    .remove("missing schemaVersion", "schemaVersion"),
    .remove("missing moduleID", "moduleID"),
    .remove("missing displayName", "displayName"),
    .remove("missing moduleVersion", "moduleVersion"),
    .remove("missing moduleType", "moduleType"),
    .remove("missing supportedPlatforms", "supportedPlatforms"),
    .remove("missing minForsettiVersion", "minForsettiVersion"),
    .remove("missing capabilitiesRequested", "capabilitiesRequested"),
    .remove("missing entryPoint", "entryPoint"),
    .set("required field is null", "displayName", .null),
    // Types.
    .set("schemaVersion is a number", "schemaVersion", .number("1.1")),
    .set("manifestTemplateVersion is a number", "manifestTemplateVersion", .number("1.1")),
    .set("displayName is a number", "displayName", 42),
    .set("capabilitiesRequested is a string", "capabilitiesRequested", "storage"),
    .set("capability is a number", "capabilitiesRequested[0]", 1),
    .set("entryPoint is a boolean", "entryPoint", true),
    .set("iapProductID is a number", "iapProductID", 42),
    // Enumerations.
    .set("unknown moduleType", "moduleType", "widget"),
    .set("moduleType in the wrong case", "moduleType", "Service"),
    .set("unknown capability", "capabilitiesRequested[0]", "camera"),
    .set("capability in the wrong case", "capabilitiesRequested[0]", "Storage"),
    .set("lowercase platform Linux", "supportedPlatforms[0]", "Linux"),
    .set("platform ios", "supportedPlatforms[1]", "ios"),
    .set("unknown defaultModuleRole", "defaultModuleRole", "admin"),
    // Lists.
    .set("duplicate capability", "capabilitiesRequested[3]", "storage"),
    .set("empty supportedPlatforms", "supportedPlatforms", []),
    .set("duplicate platform", "supportedPlatforms[2]", "linux"),
    // Versions.
    .set("moduleVersion as a string", "moduleVersion", "1.2.3"),
    .remove("moduleVersion without patch", "moduleVersion.patch"),
    .set("negative minor", "moduleVersion.minor", -1),
    .set("fractional major", "moduleVersion.major", .number("1.5")),
    .set("major as a string", "moduleVersion.major", "1"),
    .set("null patch", "moduleVersion.patch", .null),
    .set("extra key in a version", "moduleVersion.build", 7),
    .set("empty prerelease", "moduleVersion.prerelease", ""),
    .set("prerelease with an empty identifier", "moduleVersion.prerelease", "beta..1"),
    .set("prerelease with a leading zero", "moduleVersion.prerelease", "beta.01"),
    .set("prerelease with a plus", "moduleVersion.prerelease", "beta+1"),
    .set("prerelease as a number", "moduleVersion.prerelease", 1),
    .set("maxForsettiVersion as a string", "maxForsettiVersion", "0.9.0"),
    .set("minForsettiVersion is an array", "minForsettiVersion", [0, 1, 0]),
    // moduleID.
    .set("moduleID with one part", "moduleID", "probe"),
    .set("moduleID starting with a digit", "moduleID", "1com.example.probe"),
    .set("moduleID part starting with a digit", "moduleID", "com.1example"),
    .set("moduleID with a hyphen in its first part", "moduleID", "my-co.example"),
    .set("moduleID with a trailing dot", "moduleID", "com.example."),
    .set("moduleID with an underscore", "moduleID", "com.example.schema_probe"),
    .set("moduleID with a trailing newline", "moduleID", "com.example.probe\n"),
    .set("moduleID with a non-ASCII letter", "moduleID", "com.exämple.probe"),
    .set("empty moduleID", "moduleID", ""),
    .set("reserved forsetti. namespace", "moduleID", "forsetti.core.probe"),
    // entryPoint.
    .set("entryPoint with a hyphen", "entryPoint", "schema-probe-entry"),
    .set("entryPoint starting with a digit", "entryPoint", "1entry"),
    .set("entryPoint with a trailing newline", "entryPoint", "probe_entry\n"),
    .set("empty entryPoint", "entryPoint", ""),
    // Blank strings.
    .set("blank displayName", "displayName", "   "),
    .set("displayName of tabs and newlines", "displayName", "\t\n\r"),
    .set("displayName of a NEL (Unicode whitespace)", "displayName", "\u{85}"),
    .set("displayName of an ideographic space", "displayName", "\u{3000}"),
    .set("empty iapProductID", "iapProductID", ""),
    .set("blank iapProductID", "iapProductID", " "),
    // runtimeRequirements.
    .set("runtimeRequirements is an array", "runtimeRequirements", []),
    .remove("runtimeRequirements without io", "runtimeRequirements.io"),
    .remove("runtimeRequirements without dataIsolation", "runtimeRequirements.dataIsolation"),
    .set("io is an object", "runtimeRequirements.io", ["probe-store": "storage"]),
    .set("io entry is a string", "runtimeRequirements.io[0]", "probe-store"),
    .remove("io entry without requirementID", "runtimeRequirements.io[0].requirementID"),
    .set("blank requirementID", "runtimeRequirements.io[0].requirementID", " "),
    .set("unknown I/O kind", "runtimeRequirements.io[0].kind", "bluetooth"),
    .set("capability-only kind is not an I/O kind", "runtimeRequirements.io[0].kind", "crypto_utilities"),
    .set("unknown I/O access", "runtimeRequirements.io[0].access", "readwrite"),
    .remove("io entry without required", "runtimeRequirements.io[0].required"),
    .set("required is a string", "runtimeRequirements.io[0].required", "yes"),
    .set("description is a number", "runtimeRequirements.io[0].description", 1),
    .set(
      "service module with a ui block", "moduleType", "service", field: "runtimeRequirements.ui"),
    .set("ui is an array", "runtimeRequirements.ui", []),
    .set("blank controlSchemeID", "runtimeRequirements.ui.controlSchemeID", ""),
    .set("duplicate theme ID", "runtimeRequirements.ui.themeIDs[1]", "probe.dark"),
    .set("blank view ID", "runtimeRequirements.ui.viewIDs[1]", "  "),
    .set("slot ID is a number", "runtimeRequirements.ui.slotIDs[0]", 3),
    .set("routeIDs is a string", "runtimeRequirements.ui.routeIDs", "probe.route"),
    .set("dataIsolation is a string", "runtimeRequirements.dataIsolation", "private_to_module"),
    .remove("dataIsolation without mode", "runtimeRequirements.dataIsolation.mode"),
    .set("unknown dataIsolation mode", "runtimeRequirements.dataIsolation.mode", "shared"),
    .set("ownedStoreIDs is a string", "runtimeRequirements.dataIsolation.ownedStoreIDs", "probe"),
    .set("duplicate owned store", "runtimeRequirements.dataIsolation.ownedStoreIDs[1]", "probe"),
    .set("unknown required role", "runtimeRequirements.dataIsolation.requiredDefaultRoles[0]", "admin"),
  ]

  @Test func invalidTableIsLargeEnough() {
    #expect(Self.invalidCases.count >= 15)
  }

  @Test(arguments: ManifestSchemaTests.invalidCases)
  func invalidManifestIsRejectedByBoth(_ c: Case) throws {
    let manifest = try #require(c.apply(to: try Fixture.base()))
    let schemaErrors = try Fixture.validator().validate(manifest)
    #expect(!schemaErrors.isEmpty, "the schema accepts it")
    #expect(!schemaErrors.contains { $0.hasPrefix("schema error") }, "\(schemaErrors)")
    switch ManifestDecoder.decode(manifest) {
    case .success:
      Issue.record("ManifestDecoder accepts it")
    case .failure(let error):
      let field = try #require(c.expectedField)
      #expect(
        error.issues.contains {
          $0.field == field || $0.field.hasPrefix(field + ".") || $0.field.hasPrefix(field + "[")
        },
        "decoder issues: \(error)")
    }
  }

  // MARK: (c) valid variations: accepted by both

  static let validCases: [Case] = [
    .init("the base manifest (template 1.1, ui module, runtimeRequirements)", []),
    .init(
      "empty capability list",
      [
        .set("capabilitiesRequested", []), .set("runtimeRequirements.io", []),
        .remove("runtimeRequirements.ui"),
      ]),
    .init("prerelease moduleVersion", [.set("moduleVersion.prerelease", "beta.1")]),
    .init(
      "prerelease with hyphens and numeric identifiers", [.set("moduleVersion.prerelease", "rc-1.0.x-y.10")]),
    .init("prerelease null", [.set("moduleVersion.prerelease", .null)]),
    .init("prerelease host minimum", [.set("minForsettiVersion.prerelease", "alpha")]),
    .init(
      "minimal schema 1.0 service",
      [
        .set("schemaVersion", "1.0"), .remove("manifestTemplateVersion"), .set("moduleType", "service"),
        .remove("maxForsettiVersion"), .remove("iapProductID"), .remove("defaultModuleRole"),
        .remove("runtimeRequirements"),
      ]),
    .init("schema 1.0 with template 1.1", [.set("schemaVersion", "1.0")]),
    .init(
      "optional fields null",
      [
        .set("schemaVersion", "1.0"), .set("manifestTemplateVersion", .null),
        .set("maxForsettiVersion", .null),
        .set("iapProductID", .null), .set("defaultModuleRole", .null), .set("runtimeRequirements", .null),
      ]),
    .init("paid module", [.set("iapProductID", "com.example.probe.unlock")]),
    .init("unknown extra root key", [.set("x-editorNotes", ["anything": [1, .number("2.5"), nil]])]),
    .init(
      "service module with a null ui block",
      [
        .set("moduleType", "service"), .set("runtimeRequirements.ui", .null),
        .set("defaultModuleRole", .null),
      ]),
    .init(
      "app module with every platform and capability",
      [
        .set("moduleType", "app"), .set("supportedPlatforms", .strings(Platform.allCases.map(\.rawValue))),
        .set("capabilitiesRequested", .strings(Capability.allCases.map(\.rawValue))),
      ]),
    .init(
      "nulls inside runtimeRequirements",
      [
        .set("runtimeRequirements.io[0].description", .null),
        .set("runtimeRequirements.ui.controlSchemeID", .null), .set("runtimeRequirements.ui.themeIDs", .null),
        .set("runtimeRequirements.dataIsolation.ownedStoreIDs", .null),
        .set("runtimeRequirements.dataIsolation.requiredDefaultRoles", .null),
      ]),
    .init(
      "ui and dataIsolation lists omitted",
      [
        .set("runtimeRequirements.ui", [:]),
        .set("runtimeRequirements.dataIsolation", ["mode": "private_to_module"]),
      ]),
    .init(
      "shared data through a shared_database provider",
      [
        .set("runtimeRequirements.dataIsolation.mode", "framework_mediated_shared"),
        .set("runtimeRequirements.dataIsolation.requiredDefaultRoles", ["shared_database", "api"]),
      ]),
    .init(
      "shared database service",
      [
        .set("moduleType", "service"), .remove("runtimeRequirements.ui"),
        .set("defaultModuleRole", "shared_database"), .set("capabilitiesRequested[3]", "shared_database"),
        .set(
          "runtimeRequirements.io[1]",
          ["requirementID": "db", "kind": "shared_database", "access": "consume", "required": false]),
      ]),
    .init("unknown keys inside runtimeRequirements", [.set("runtimeRequirements.io[0].x-note", "kept")]),
    .init("displayName with surrounding spaces", [.set("displayName", "  Probe  ")]),
    .init(
      "displayName of a zero-width no-break space (not Unicode whitespace)", [.set("displayName", "\u{FEFF}")]
    ),
    .init("moduleID with digits and hyphens", [.set("moduleID", "a1.b-2.c3-")]),
    .init("entryPoint with underscores and digits", [.set("entryPoint", "_probe_entry_9")]),
    .init(
      "large version numbers", [.set("moduleVersion", ["major": 2_147_483_648, "minor": 0, "patch": 0])]),
  ]

  @Test(arguments: ManifestSchemaTests.validCases)
  func validVariationIsAcceptedByBoth(_ c: Case) throws {
    let manifest = try #require(c.apply(to: try Fixture.base()))
    #expect(try Fixture.validator().validate(manifest) == [])
    if case .failure(let error) = ManifestDecoder.decode(manifest) {
      Issue.record("ManifestDecoder rejects it: \(error)")
    }
  }

  // MARK: known gaps between the schema and the decoder

  /// Where JSON Schema cannot follow the decoder (or deliberately goes further), pinned so that a
  /// change on either side shows up here. The schema's root `$comment` lists the same gaps.
  static let knownGaps: [Case] = [
    // The decoder only type-checks these; CompatibilityChecker judges the values later.
    .init("schemaVersion 2.0", [.set("schemaVersion", "2.0")], schemaAccepts: false, decoderAccepts: true),
    .init(
      "manifestTemplateVersion 1.2", [.set("manifestTemplateVersion", "1.2")], schemaAccepts: false,
      decoderAccepts: true),
    // JSON Schema judges a number's value; the decoder also how it is written.
    .init(
      "major written as 1.0", [.set("moduleVersion.major", .number("1.0"))], schemaAccepts: true,
      decoderAccepts: false),
    .init(
      "minor written as 1e0", [.set("moduleVersion.minor", .number("1e0"))], schemaAccepts: true,
      decoderAccepts: false),
    .init(
      "patch beyond Int64", [.set("moduleVersion.patch", .number("99999999999999999999"))],
      schemaAccepts: true,
      decoderAccepts: false),
    // Relations between values.
    .init(
      "maxForsettiVersion below minForsettiVersion",
      [.set("maxForsettiVersion", ["major": 0, "minor": 0, "patch": 9])], schemaAccepts: true,
      decoderAccepts: false),
    .init(
      "duplicate requirementID",
      [
        .set(
          "runtimeRequirements.io[1]",
          ["requirementID": "probe-store", "kind": "storage", "access": "read", "required": false])
      ],
      schemaAccepts: true, decoderAccepts: false),
    // Blankness per grapheme: a space carrying a combining accent is one whitespace Character.
    .init(
      "displayName of a space with a combining accent", [.set("displayName", " \u{301}")],
      schemaAccepts: true, decoderAccepts: false),
  ]

  @Test(arguments: ManifestSchemaTests.knownGaps)
  func knownGapIsAsDocumented(_ c: Case) throws {
    let manifest = try #require(c.apply(to: try Fixture.base()))
    let schemaErrors = try Fixture.validator().validate(manifest)
    #expect(!schemaErrors.contains { $0.hasPrefix("schema error") }, "\(schemaErrors)")
    #expect(schemaErrors.isEmpty == c.schemaAccepts, "schema: \(schemaErrors)")
    let decoded = ManifestDecoder.decode(manifest)
    #expect(((try? decoded.get()) != nil) == c.decoderAccepts, "decoder: \(decoded)")
  }

  // MARK: the validator itself

  @Test func validatorReportsUnsupportedKeywordsEvenWhenUnused() throws {
    let schema = try JSONParser.parse(
      #"{"type": "object", "properties": {"a": {"type": "string", "format": "email"}}, "maxProperties": 3}"#)
    let errors = JSONSchemaValidator(schema: schema).validate(["b": 1])
    #expect(errors.contains { $0.contains("\"format\"") && $0.contains("#/properties/a/format") })
    #expect(errors.contains { $0.contains("\"maxProperties\"") })
  }

  @Test func validatorReportsUnresolvableReferences() throws {
    let schema = try JSONParser.parse(##"{"$ref": "#/$defs/missing", "$defs": {}}"##)
    #expect(!JSONSchemaValidator(schema: schema).validate("x").isEmpty)
    let remote = try JSONParser.parse(#"{"$ref": "https://example.com/other.json"}"#)
    #expect(!JSONSchemaValidator(schema: remote).validate("x").isEmpty)
  }

  @Test func validatorFollowsTheSpecification() throws {
    let schema = try JSONParser.parse(
      #"""
      {
        "type": "object",
        "additionalProperties": false,
        "properties": {
          "n": {"type": "integer", "minimum": 0},
          "list": {"type": "array", "uniqueItems": true, "minItems": 1},
          "word": {"type": "string", "pattern": "^[a-z]+$", "minLength": 2},
          "pick": {"oneOf": [{"const": 1}, {"enum": [1, 2]}]},
          "cond": {"if": {"type": "string"}, "then": {"const": "yes"}, "else": {"type": "null"}}
        }
      }
      """#)
    let v = JSONSchemaValidator(schema: schema)
    #expect(v.schemaErrors == [])
    #expect(v.isValid(["n": .number("1.0")]))
    #expect(v.isValid(["n": .number("-0")]))
    #expect(v.isValid(["n": .number("12e1")]))
    #expect(!v.isValid(["n": .number("1.5")]))
    #expect(!v.isValid(["n": .number("-1e-3")]))
    #expect(!v.isValid(["n": -1]))
    #expect(!v.isValid(["list": [1, .number("1.0")]]))
    #expect(!v.isValid(["list": [["a": 1, "b": 2], ["b": 2, "a": 1]]]))
    #expect(v.isValid(["list": [["a": 1], ["a": 2]]]))
    #expect(!v.isValid(["list": []]))
    #expect(v.isValid(["word": "ok"]))
    #expect(!v.isValid(["word": "ok\n"]))
    #expect(!v.isValid(["word": "o"]))
    #expect(v.isValid(["pick": 2]))
    #expect(!v.isValid(["pick": 1]))
    #expect(v.isValid(["cond": "yes"]))
    #expect(!v.isValid(["cond": "no"]))
    #expect(v.isValid(["cond": .null]))
    #expect(!v.isValid(["cond": 3]))
    #expect(v.validate(["extra": true]) == [#"$.extra: property "extra" is not allowed"#])
    #expect(v.validate(["n": "1"]) == ["$.n: expected integer, found string"])
  }
}

// MARK: - Fixtures

extension ManifestSchemaTests {
  /// One manifest derived from the base by a list of edits, with the verdicts expected of it.
  struct Case: Sendable, CustomTestStringConvertible {
    var name: String
    var edits: [Edit]
    /// For invalid cases: the decoder issue field expected (or a parent of it).
    var expectedField: String?
    var schemaAccepts = true
    var decoderAccepts = true

    var testDescription: String { name }

    init(_ name: String, _ edits: [Edit], schemaAccepts: Bool = true, decoderAccepts: Bool = true) {
      self.name = name
      self.edits = edits
      self.schemaAccepts = schemaAccepts
      self.decoderAccepts = decoderAccepts
    }

    /// An invalid case setting `path` to `value`; the decoder must report `field` (default: `path`).
    static func set(_ name: String, _ path: String, _ value: JSONValue, field: String? = nil) -> Case {
      var c = Case(name, [.set(path, value)], schemaAccepts: false, decoderAccepts: false)
      c.expectedField = field ?? (path.isEmpty ? "(root)" : path)
      return c
    }

    /// An invalid case removing `path`; the decoder must report it missing.
    static func remove(_ name: String, _ path: String) -> Case {
      var c = Case(name, [.remove(path)], schemaAccepts: false, decoderAccepts: false)
      c.expectedField = path
      return c
    }

    /// The edited manifest, or nil when an edit's path does not exist in it.
    func apply(to base: JSONValue) -> JSONValue? {
      var doc = base
      for edit in edits {
        guard let steps = Edit.steps(edit.path), Edit.put(edit.value, at: steps[...], in: &doc) else {
          return nil
        }
      }
      return doc
    }
  }

  /// Sets (or, with a nil value, removes) the value at a path such as `runtimeRequirements.io[0].kind`;
  /// the empty path is the whole document, and an index one past the end appends.
  struct Edit: Sendable {
    var path: String
    var value: JSONValue?

    static func set(_ path: String, _ value: JSONValue) -> Edit { .init(path: path, value: value) }
    static func remove(_ path: String) -> Edit { .init(path: path, value: nil) }

    enum Step {
      case key(String)
      case index(Int)
    }

    static func steps(_ path: String) -> [Step]? {
      var steps: [Step] = []
      for part in path.split(separator: ".", omittingEmptySubsequences: false) where !path.isEmpty {
        var rest = Substring(part)
        if let bracket = rest.firstIndex(of: "[") {
          if bracket > rest.startIndex { steps.append(.key(String(rest[..<bracket]))) }
          rest = rest[bracket...]
          while rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]"),
              let i = Int(rest[rest.index(after: rest.startIndex)..<close])
            else { return nil }
            steps.append(.index(i))
            rest = rest[rest.index(after: close)...]
          }
          guard rest.isEmpty else { return nil }
        } else {
          guard !rest.isEmpty else { return nil }
          steps.append(.key(String(rest)))
        }
      }
      return steps
    }

    static func put(_ value: JSONValue?, at steps: ArraySlice<Step>, in doc: inout JSONValue) -> Bool {
      guard let step = steps.first else {
        guard let value else { return false }
        doc = value
        return true
      }
      let rest = steps.dropFirst()
      switch (step, doc) {
      case (.key(let k), .object(var o)):
        if rest.isEmpty {
          guard value != nil || o[k] != nil else { return false }
          o[k] = value
        } else {
          guard var child = o[k], put(value, at: rest, in: &child) else { return false }
          o[k] = child
        }
        doc = .object(o)
        return true
      case (.index(let i), .array(var a)):
        guard i >= 0, i <= a.count else { return false }
        if rest.isEmpty {
          if let value {
            if i == a.count { a.append(value) } else { a[i] = value }
          } else {
            guard i < a.count else { return false }
            a.remove(at: i)
          }
        } else {
          guard i < a.count, put(value, at: rest, in: &a[i]) else { return false }
        }
        doc = .array(a)
        return true
      default:
        return false
      }
    }
  }

  enum Fixture {
    /// The package root: this file is `<root>/Tests/ForsettiCoreTests/ManifestSchemaTests.swift`.
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
      .deletingLastPathComponent().deletingLastPathComponent()
    static let manifestsDirectory = packageRoot.appendingPathComponent("manifests")
    static let schemaFile = manifestsDirectory.appendingPathComponent("schema/forsetti-manifest.schema.json")

    struct Unreadable: Error, CustomStringConvertible {
      var path: String
      var description: String { "cannot read \(path)" }
    }

    static func bytes(_ url: URL) throws -> [UInt8] {
      guard let data = FileManager.default.contents(atPath: url.path) else {
        throw Unreadable(path: url.path)
      }
      return Array(data)
    }

    static func schema() throws -> JSONValue { try JSONParser.parse(bytes(schemaFile)) }

    static func validator() throws -> JSONSchemaValidator { JSONSchemaValidator(schema: try schema()) }

    /// The `*.json` files directly in `manifests/` (the schema lives in a subdirectory).
    static func shippedManifestNames() -> [String] {
      let names = (try? FileManager.default.contentsOfDirectory(atPath: manifestsDirectory.path)) ?? []
      return names.filter { $0.hasSuffix(".json") }.sorted()
    }

    /// A valid template 1.1 ui module using every field, from which each case makes its changes.
    static func base() throws -> JSONValue {
      try JSONParser.parse(
        #"""
        {
          "schemaVersion": "1.1",
          "manifestTemplateVersion": "1.1",
          "moduleID": "com.example.schema-probe",
          "displayName": "Schema Probe",
          "moduleVersion": { "major": 1, "minor": 2, "patch": 3 },
          "moduleType": "ui",
          "supportedPlatforms": ["linux", "macOS"],
          "minForsettiVersion": { "major": 0, "minor": 1, "patch": 0 },
          "maxForsettiVersion": { "major": 0, "minor": 9, "patch": 0, "prerelease": null },
          "capabilitiesRequested": ["storage", "toolbar_items", "view_injection"],
          "iapProductID": null,
          "entryPoint": "schema_probe_entry",
          "defaultModuleRole": "ui",
          "runtimeRequirements": {
            "io": [
              { "requirementID": "probe-store", "kind": "storage", "access": "read_write", "required": true,
                "description": "Keeps probe results." }
            ],
            "ui": {
              "controlSchemeID": "probe.controls", "layoutID": null, "themeIDs": ["probe.dark"],
              "viewIDs": ["probe.summary"], "slotIDs": ["main.sidebar"], "toolbarItemIDs": ["probe.refresh"],
              "routeIDs": [], "pointerIDs": []
            },
            "dataIsolation": { "mode": "private_to_module", "ownedStoreIDs": ["probe"], "requiredDefaultRoles": [] }
          }
        }
        """#)
    }
  }
}
