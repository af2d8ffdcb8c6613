/// The operator's activation choices (upstream Forsetti's enabled set and selected UI module),
/// the content of `STATE/activation.json`.
///
/// A module is in at most one of `enabled` and `disabled`; one in neither follows the host's
/// `DefaultPolicy`. The mutating methods keep that invariant, and `decode` refuses a file that
/// breaks it, so `ActivationRules` never has to choose between the two.
public struct ActivationState: Sendable, Hashable {
  /// Module IDs the operator enabled explicitly.
  public var enabled: Set<String>
  /// Module IDs the operator disabled explicitly.
  public var disabled: Set<String>
  /// Which UI or app module is active.
  public var ui: UISelection

  /// The operator's choice of the one active UI or app module.
  public enum UISelection: Sendable, Hashable {
    /// The first enabled UI or app module by module ID.
    case automatic
    /// No UI or app module is active.
    case none
    /// This module, while it is eligible and enabled; otherwise as `automatic`.
    case module(String)
  }

  /// The only version of the file's form this host reads and writes.
  public static let version = 1

  /// A state: by default nothing chosen, so every module follows the default policy.
  public init(enabled: Set<String> = [], disabled: Set<String> = [], ui: UISelection = .automatic) {
    self.enabled = enabled
    self.disabled = disabled
    self.ui = ui
  }

  /// Enables `id` explicitly.
  public mutating func enable(_ id: String) {
    enabled.insert(id)
    disabled.remove(id)
  }

  /// Disables `id` explicitly; a disabled module cannot stay the selected UI module.
  public mutating func disable(_ id: String) {
    disabled.insert(id)
    enabled.remove(id)
    if ui == .module(id) { ui = .automatic }
  }

  /// Enables `id` and makes it the active UI module.
  public mutating func select(_ id: String) {
    enable(id)
    ui = .module(id)
  }

  /// Deactivates every UI and app module.
  public mutating func selectNone() { ui = .none }

  /// `{"version":1,"enabled":[…],"disabled":[…],"ui":"automatic"|"none"|{"selected":"ID"}}`, IDs
  /// in byte order so the file is the same for the same state.
  public var json: JSONValue {
    let uiValue: JSONValue =
      switch ui {
      case .automatic: "automatic"
      case .none: "none"
      case .module(let id): .object(JSONObject([("selected", .string(id))]))
      }
    return .object(
      JSONObject([
        ("version", .number(String(Self.version))), ("enabled", .strings(Self.byteOrder(enabled))),
        ("disabled", .strings(Self.byteOrder(disabled))), ("ui", uiValue),
      ]))
  }

  static func byteOrder(_ ids: Set<String>) -> [String] {
    ids.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
  }

  static let fields = ["version", "enabled", "disabled", "ui"]

  /// Reads the form `json` writes. `enabled`, `disabled` and `ui` may be left out (empty, empty,
  /// automatic); unknown members are refused so that a misspelt one is not silently ignored.
  public static func decode(_ v: JSONValue) -> Result<ActivationState, StateFileError> {
    guard let root = v.objectValue else {
      return .failure(.malformed(field: "(root)", expected: "an object, found \(v.typeName)"))
    }
    for key in root.keys where !fields.contains(key) {
      let hint = Suggestion.closest(to: key, among: fields).map { " (did you mean \"\($0)\"?)" } ?? ""
      return .failure(
        .malformed(field: key, expected: "only version, enabled, disabled and ui\(hint)"))
    }
    guard let version = root["version"] else {
      return .failure(.malformed(field: "version", expected: "\(Self.version), found nothing"))
    }
    guard version.integerValue == Self.version else {
      return .failure(.malformed(field: "version", expected: "\(Self.version), found \(describe(version))"))
    }
    let enabled: Set<String>
    let disabled: Set<String>
    switch (ids(root, "enabled"), ids(root, "disabled")) {
    case (.failure(let e), _), (_, .failure(let e)): return .failure(e)
    case (.success(let en), .success(let dis)):
      enabled = en
      disabled = dis
    }
    if let both = byteOrder(enabled.intersection(disabled)).first {
      return .failure(
        .malformed(
          field: "enabled", expected: "no module also in disabled, found \"\(both)\" in both"))
    }
    let ui: UISelection
    switch selection(root["ui"]) {
    case .failure(let e): return .failure(e)
    case .success(let s): ui = s
    }
    if case .module(let id) = ui, disabled.contains(id) {
      return .failure(
        .malformed(field: "ui.selected", expected: "a module not in disabled, found \"\(id)\""))
    }
    return .success(ActivationState(enabled: enabled, disabled: disabled, ui: ui))
  }

  private static func ids(_ root: JSONObject, _ field: String) -> Result<Set<String>, StateFileError> {
    guard let value = root[field] else { return .success([]) }
    guard let list = value.arrayValue else {
      return .failure(.malformed(field: field, expected: "an array of module IDs, found \(value.typeName)"))
    }
    var out = Set<String>()
    for (i, item) in list.enumerated() {
      guard let id = item.stringValue, !id.isEmpty else {
        return .failure(
          .malformed(
            field: "\(field)[\(i)]", expected: "a non-empty module ID string, found \(describe(item))"))
      }
      out.insert(id)
    }
    return .success(out)
  }

  private static func selection(_ value: JSONValue?) -> Result<UISelection, StateFileError> {
    let expected = "\"automatic\", \"none\" or {\"selected\":\"MODULE_ID\"}"
    switch value {
    case nil, .string("automatic"): return .success(.automatic)
    case .string("none"): return .success(.none)
    case .object(let o):
      guard o.keys == ["selected"], let selected = o["selected"] else {
        let found = o.keys.isEmpty ? "an empty object" : "an object with \(o.keys.joined(separator: ", "))"
        return .failure(.malformed(field: "ui", expected: "\(expected), found \(found)"))
      }
      guard let id = selected.stringValue, !id.isEmpty else {
        return .failure(
          .malformed(
            field: "ui.selected", expected: "a non-empty module ID string, found \(describe(selected))"))
      }
      return .success(.module(id))
    case .some(let other):
      return .failure(.malformed(field: "ui", expected: "\(expected), found \(describe(other))"))
    }
  }

  /// A found value for an error message: short scalars as written, the rest by type.
  private static func describe(_ v: JSONValue) -> String {
    switch v {
    case .number(let n) where n.utf8.count <= 20: n
    case .string(let s) where s.utf8.count <= 60: JSONWriter.string(.string(s))
    case .bool(let b): b ? "true" : "false"
    default: v.typeName
    }
  }
}

/// ForgeAccess's default policy: what a module the operator neither enabled nor disabled does.
public enum DefaultPolicy: String, Sendable, Hashable, CaseIterable {
  /// Every eligible module is enabled unless disabled.
  case allow
  /// Only modules enabled by the operator or unlocked explicitly (an override on, a paid product
  /// unlocked) are enabled; other free modules stay inactive.
  case deny
}
