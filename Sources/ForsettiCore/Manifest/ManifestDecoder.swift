/// Turns untrusted JSON into a `ModuleManifest`, or into every `ManifestIssue` found.
///
/// This is the manifest's one validation boundary: past it, code works with typed values.
/// Values that a later gate judges (`schemaVersion`, `manifestTemplateVersion`) are only
/// type-checked here so that the gate can name them with its own reason code.
public enum ManifestDecoder {
  /// The nine root keys; a JSON file with none of them is not a manifest (fallback discovery).
  public static let rootKeys = [
    "schemaVersion", "moduleID", "displayName", "moduleVersion", "moduleType", "supportedPlatforms",
    "minForsettiVersion", "capabilitiesRequested", "entryPoint",
  ]

  /// Whether `value` carries at least one manifest root key.
  public static func looksLikeManifest(_ value: JSONValue) -> Bool {
    guard let object = value.objectValue else { return false }
    return rootKeys.contains { object[$0] != nil }
  }

  /// Decodes and validates a parsed document.
  public static func decode(_ value: JSONValue) -> Result<ModuleManifest, ManifestValidationError> {
    guard let object = value.objectValue else {
      return .failure(
        .init(issues: [.init(field: "(root)", problem: .wrongType(expected: "object", found: value.typeName))]
        ))
    }
    var r = Reader()
    let manifest = r.manifest(object)
    if let manifest, r.issues.isEmpty { return .success(manifest) }
    return .failure(.init(issues: r.issues))
  }

  /// Parses and decodes manifest bytes.
  public static func decode(bytes: [UInt8]) -> Result<ModuleManifest, ManifestLoadError> {
    if let m = ManifestFastPath.decode(bytes) { return .success(m) }
    let value: JSONValue
    do { value = try JSONParser.parse(bytes) } catch { return .failure(.invalidJSON(error)) }
    return decode(value).mapError { .invalid($0) }
  }
}

/// Why manifest bytes did not yield a manifest.
public enum ManifestLoadError: Error, Sendable, Hashable, CustomStringConvertible {
  case invalidJSON(JSONSyntaxError)
  case invalid(ManifestValidationError)

  public var reason: ReasonCode {
    switch self {
    case .invalidJSON: .invalidJSON
    case .invalid: .validationFailed
    }
  }

  public var description: String {
    switch self {
    case .invalidJSON(let e): "invalid JSON at \(e)"
    case .invalid(let e): e.description
    }
  }
}

// Field-by-field reading that records an issue and carries on, so one run reports them all.
private struct Reader {
  var issues: [ManifestIssue] = []
  /// No list in a manifest is legitimately longer; the bound keeps duplicate checks cheap.
  static let maxListLength = 1024

  mutating func add(_ field: String, _ problem: ManifestIssue.Problem) {
    issues.append(.init(field: field, problem: problem))
  }

  mutating func manifest(_ o: JSONObject) -> ModuleManifest? {
    let schemaVersion = string(o, "schemaVersion", required: true)
    let template = string(o, "manifestTemplateVersion", required: false)
    let moduleID = string(o, "moduleID", required: true).flatMap { id -> String? in
      if id.hasPrefix("forsetti.") {
        add("moduleID", .reservedNamespace(id))
        return nil
      }
      guard ManifestText.isModuleID(id) else {
        add("moduleID", id.isEmpty ? .blank : .invalidModuleID(id))
        return nil
      }
      return id
    }
    let displayName = nonBlank(o, "displayName", required: true)
    let moduleVersion = version(o, "moduleVersion", required: true)
    let moduleType: ModuleType? = enumValue(o, "moduleType", required: true)
    let platforms: [Platform]? = enumList(o, "supportedPlatforms", required: true, nonEmpty: true)
    let minVersion = version(o, "minForsettiVersion", required: true)
    let maxVersion = version(o, "maxForsettiVersion", required: false)
    if let minVersion, let maxVersion, maxVersion < minVersion {
      add("maxForsettiVersion", .maxBelowMin(min: minVersion, max: maxVersion))
    }
    let capabilities: [Capability]? = enumList(o, "capabilitiesRequested", required: true, nonEmpty: false)
    let product = nonBlank(o, "iapProductID", required: false, blankHint: true)
    let entryPoint = string(o, "entryPoint", required: true).flatMap { name -> String? in
      guard ManifestText.isCIdentifier(name) else {
        add("entryPoint", name.isEmpty ? .blank : .invalidEntryPoint(name))
        return nil
      }
      return name
    }
    let role: DefaultModuleRole? = enumValue(o, "defaultModuleRole", required: false)
    var requirements: RuntimeRequirements?
    if let value = o["runtimeRequirements"], !value.isNull {
      requirements = runtimeRequirements(value, moduleType: moduleType)
    }

    guard let schemaVersion, let moduleID, let displayName, let moduleVersion, let moduleType,
      let platforms, let minVersion, let capabilities, let entryPoint
    else { return nil }
    return ModuleManifest(
      schemaVersion: schemaVersion, manifestTemplateVersion: template, moduleID: moduleID,
      displayName: displayName, moduleVersion: moduleVersion, moduleType: moduleType,
      supportedPlatforms: platforms, minForsettiVersion: minVersion, maxForsettiVersion: maxVersion,
      capabilitiesRequested: capabilities, iapProductID: product, entryPoint: entryPoint,
      defaultModuleRole: role, runtimeRequirements: requirements)
  }

  // MARK: primitives

  /// The member, or nil (with a `missingField` issue when required). `null` counts as absent.
  mutating func member(_ o: JSONObject, _ key: String, path: String, required: Bool) -> JSONValue? {
    guard let v = o[key], !v.isNull else {
      if required { add(path, .missingField) }
      return nil
    }
    return v
  }

  mutating func string(_ o: JSONObject, _ key: String, path: String? = nil, required: Bool) -> String? {
    let p = path ?? key
    guard let v = member(o, key, path: p, required: required) else { return nil }
    guard let s = v.stringValue else {
      add(p, .wrongType(expected: "string", found: v.typeName))
      return nil
    }
    return plain(s, at: p)
  }

  /// `s`, unless it holds a character the module-text rule escapes (`ModuleText`): a manifest's
  /// text is shown in tables, traces, prompts and pages, where such a character would move the
  /// cursor, start a forged line or reorder what follows; no field needs one.
  mutating func plain(_ s: String, at path: String) -> String? {
    guard let bad = s.unicodeScalars.firstIndex(where: ModuleText.isEscaped) else { return s }
    let offset = s.unicodeScalars.distance(from: s.unicodeScalars.startIndex, to: bad)
    add(path, .controlCharacter(s, scalar: s.unicodeScalars[bad], offset: offset))
    return nil
  }

  mutating func nonBlank(
    _ o: JSONObject, _ key: String, path: String? = nil, required: Bool, blankHint: Bool = false
  ) -> String? {
    let p = path ?? key
    guard let s = string(o, key, path: p, required: required) else { return nil }
    if ManifestText.isBlank(s) {
      add(p, blankHint ? .notAllowed("must not be blank; use null for a free module") : .blank)
      return nil
    }
    return s
  }

  mutating func bool(_ o: JSONObject, _ key: String, path: String, required: Bool) -> Bool? {
    guard let v = member(o, key, path: path, required: required) else { return nil }
    guard let b = v.boolValue else {
      add(path, .wrongType(expected: "boolean", found: v.typeName))
      return nil
    }
    return b
  }

  mutating func enumValue<E: RawRepresentable & CaseIterable>(
    _ o: JSONObject, _ key: String, path: String? = nil, required: Bool
  ) -> E? where E.RawValue == String {
    let p = path ?? key
    guard let s = string(o, key, path: p, required: required) else { return nil }
    return parseEnum(s, path: p)
  }

  /// `path` is built only when there is an issue to report: lists name each element's path.
  mutating func parseEnum<E: RawRepresentable & CaseIterable>(_ s: String, path: @autoclosure () -> String)
    -> E?
  where E.RawValue == String {
    if let e = E(rawValue: s) { return e }
    add(path(), .unknownValue(s, allowed: E.allCases.map(\.rawValue)))
    return nil
  }

  /// A list of enumeration values without duplicates.
  mutating func enumList<E: RawRepresentable & CaseIterable & Hashable>(
    _ o: JSONObject, _ key: String, path: String? = nil, required: Bool, nonEmpty: Bool
  ) -> [E]? where E.RawValue == String {
    let p = path ?? key
    guard let strings = stringList(o, key, path: p, required: required, nonEmpty: nonEmpty) else {
      return nil
    }
    var out: [E] = []
    var ok = true
    for (i, s) in strings.enumerated() {
      if let e: E = parseEnum(s, path: "\(p)[\(i)]") { out.append(e) } else { ok = false }
    }
    return ok ? out : nil
  }

  /// A list of non-blank strings without duplicates.
  mutating func stringList(
    _ o: JSONObject, _ key: String, path: String? = nil, required: Bool, nonEmpty: Bool = false
  ) -> [String]? {
    let p = path ?? key
    guard let v = member(o, key, path: p, required: required) else { return required ? nil : [] }
    guard let items = v.arrayValue else {
      add(p, .wrongType(expected: "array of strings", found: v.typeName))
      return nil
    }
    guard items.count <= Self.maxListLength else {
      add(p, .notAllowed("lists at most \(Self.maxListLength) entries"))
      return nil
    }
    if nonEmpty && items.isEmpty {
      add(p, .emptyList)
      return nil
    }
    var out: [String] = []
    var ok = true
    for (i, item) in items.enumerated() {
      guard let raw = item.stringValue else {
        add("\(p)[\(i)]", .wrongType(expected: "string", found: item.typeName))
        ok = false
        continue
      }
      guard let s = plain(raw, at: "\(p)[\(i)]") else {
        ok = false
        continue
      }
      if ManifestText.isBlank(s) {
        add("\(p)[\(i)]", .blank)
        ok = false
      } else if out.contains(s) {
        // Linear: lists are short, and hashing cost more than the scan (see JSONObject).
        add("\(p)[\(i)]", .duplicateValue(s))
        ok = false
      }
      out.append(s)
    }
    return ok ? out : nil
  }

  mutating func version(_ o: JSONObject, _ key: String, path: String? = nil, required: Bool)
    -> SemanticVersion?
  {
    let p = path ?? key
    guard let v = member(o, key, path: p, required: required) else { return nil }
    guard let obj = v.objectValue else {
      if let s = v.stringValue, SemanticVersion(parsing: s) != nil {
        add(
          p, .malformedVersion("write the version as an object {\"major\",\"minor\",\"patch\"}, not \"\(s)\"")
        )
      } else {
        add(p, .wrongType(expected: "version object {\"major\",\"minor\",\"patch\"}", found: v.typeName))
      }
      return nil
    }
    // One pass over the members (a version object is read twice per manifest, a thousand
    // manifests at a time); issues are still reported major, minor, patch, prerelease, extras.
    var numbers: (JSONValue?, JSONValue?, JSONValue?) = (nil, nil, nil)
    var prerelease: JSONValue?
    var extras: [String] = []
    for (k, value) in zip(obj.keys, obj.values) {
      switch k {
      case "major": numbers.0 = value
      case "minor": numbers.1 = value
      case "patch": numbers.2 = value
      case "prerelease": prerelease = value
      default: extras.append(k)
      }
    }
    var parts = (0, 0, 0)
    var complete = true
    func part(_ name: String, _ value: JSONValue?, _ r: inout Reader) -> Int {
      guard let n = value else {
        r.add("\(p).\(name)", .missingField)
        complete = false
        return 0
      }
      guard let i = n.integerValue, i >= 0 else {
        let found = n.integerValue.map(String.init) ?? r.describe(n)
        r.add("\(p).\(name)", .malformedVersion("expected a non-negative integer, found \(found)"))
        complete = false
        return 0
      }
      return i
    }
    parts.0 = part("major", numbers.0, &self)
    parts.1 = part("minor", numbers.1, &self)
    parts.2 = part("patch", numbers.2, &self)
    var pre: String?
    if let pv = prerelease, !pv.isNull {
      if let s = pv.stringValue, SemanticVersion.isValidPrerelease(s) {
        pre = s
      } else {
        add(
          "\(p).prerelease",
          .malformedVersion("expected dot-separated [0-9A-Za-z-] identifiers or null, found \(describe(pv))"))
        return nil
      }
    }
    for extra in extras {
      add("\(p).\(extra)", .notAllowed("unknown key in a version object"))
    }
    guard complete else { return nil }
    return SemanticVersion(parts.0, parts.1, parts.2, prerelease: pre)
  }

  func describe(_ v: JSONValue) -> String {
    switch v {
    case .number(let n): n
    case .string(let s): "\"\(s)\""
    default: v.typeName
    }
  }

  mutating func object(_ v: JSONValue, path: String) -> JSONObject? {
    guard let o = v.objectValue else {
      add(path, .wrongType(expected: "object", found: v.typeName))
      return nil
    }
    return o
  }

  // MARK: runtimeRequirements

  mutating func runtimeRequirements(_ v: JSONValue, moduleType: ModuleType?) -> RuntimeRequirements? {
    let p = "runtimeRequirements"
    guard let o = object(v, path: p) else { return nil }
    let io = ioList(o)
    var ui: UIDeclarations?
    var uiOK = true
    if let uv = o["ui"], !uv.isNull {
      if moduleType == .service {
        add("\(p).ui", .notAllowed("service modules must not carry a ui block"))
        uiOK = false
      } else if let uo = object(uv, path: "\(p).ui") {
        ui = uiDeclarations(uo)
        uiOK = ui != nil
      } else {
        uiOK = false
      }
    }
    let isolation = dataIsolation(o)
    guard let io, uiOK, let isolation else { return nil }
    return RuntimeRequirements(io: io, ui: ui, dataIsolation: isolation)
  }

  mutating func ioList(_ o: JSONObject) -> [IORequirement]? {
    let p = "runtimeRequirements.io"
    guard let v = member(o, "io", path: p, required: true) else { return nil }
    guard let items = v.arrayValue else {
      add(p, .wrongType(expected: "array of I/O requirements", found: v.typeName))
      return nil
    }
    var out: [IORequirement] = []
    var seen = Set<String>()
    var ok = true
    for (i, item) in items.enumerated() {
      let ip = "\(p)[\(i)]"
      guard let io = object(item, path: ip) else {
        ok = false
        continue
      }
      let id = nonBlank(io, "requirementID", path: "\(ip).requirementID", required: true)
      if let id, !seen.insert(id).inserted {
        add("\(ip).requirementID", .duplicateValue(id))
        ok = false
      }
      let kind: IOKind? = enumValue(io, "kind", path: "\(ip).kind", required: true)
      let access: IOAccess? = enumValue(io, "access", path: "\(ip).access", required: true)
      let required = bool(io, "required", path: "\(ip).required", required: true)
      let description = string(io, "description", path: "\(ip).description", required: false)
      if let id, let kind, let access, let required {
        out.append(
          .init(requirementID: id, kind: kind, access: access, required: required, description: description))
      } else {
        ok = false
      }
    }
    return ok ? out : nil
  }

  mutating func uiDeclarations(_ o: JSONObject) -> UIDeclarations? {
    let p = "runtimeRequirements.ui"
    let before = issues.count
    let scheme = nonBlank(o, "controlSchemeID", path: "\(p).controlSchemeID", required: false)
    let layout = nonBlank(o, "layoutID", path: "\(p).layoutID", required: false)
    func list(_ key: String, _ r: inout Reader) -> [String] {
      r.stringList(o, key, path: "\(p).\(key)", required: false) ?? []
    }
    let decl = UIDeclarations(
      controlSchemeID: scheme, layoutID: layout, themeIDs: list("themeIDs", &self),
      viewIDs: list("viewIDs", &self), slotIDs: list("slotIDs", &self),
      toolbarItemIDs: list("toolbarItemIDs", &self), routeIDs: list("routeIDs", &self),
      pointerIDs: list("pointerIDs", &self))
    return issues.count == before ? decl : nil
  }

  mutating func dataIsolation(_ o: JSONObject) -> DataIsolation? {
    let p = "runtimeRequirements.dataIsolation"
    guard let v = member(o, "dataIsolation", path: p, required: true), let d = object(v, path: p) else {
      return nil
    }
    let mode: DataIsolationMode? = enumValue(d, "mode", path: "\(p).mode", required: true)
    let stores = stringList(d, "ownedStoreIDs", path: "\(p).ownedStoreIDs", required: false)
    let roles: [DefaultModuleRole]? = enumList(
      d, "requiredDefaultRoles", path: "\(p).requiredDefaultRoles", required: false, nonEmpty: false)
    guard let mode, let stores, let roles else { return nil }
    return DataIsolation(mode: mode, ownedStoreIDs: stores, requiredDefaultRoles: roles)
  }
}
