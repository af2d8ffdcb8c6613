/// A capability policy as the operator writes it (`--policy FILE`): a default and an ordered list
/// of allow/deny rules, each naming capabilities and modules. Decoded once into this value;
/// `RuleCapabilityPolicy` judges with it.
///
/// ```json
/// {"default": "allow",
///  "rules": [{"effect": "deny", "capabilities": ["networking"], "modules": ["com.acme.*"]}]}
/// ```
public struct PolicyFile: Sendable, Equatable {
  /// What a rule, or the default, says.
  public enum Effect: String, Sendable, Equatable, CaseIterable {
    case allow, deny
  }

  /// Which modules a rule names: one module ID exactly, every ID under a prefix (`com.acme.*`
  /// matches `com.acme.a` and `com.acme.a.b`, not `com.acme` itself), or every module (`*`).
  public enum ModulePattern: Sendable, Equatable, CustomStringConvertible {
    case exact(String)
    case prefix(String)
    case any

    /// Whether `moduleID` is one this pattern names.
    public func matches(_ moduleID: String) -> Bool {
      switch self {
      case .exact(let id): moduleID == id
      case .prefix(let p): moduleID.hasPrefix(p + ".")
      case .any: true
      }
    }

    public var description: String {
      switch self {
      case .exact(let id): id
      case .prefix(let p): p + ".*"
      case .any: "*"
      }
    }
  }

  /// One entry of `rules`: `effect` for `capabilities` (nil: every capability, written `"*"`)
  /// requested by a module that `modules` names.
  public struct Rule: Sendable, Equatable, CustomStringConvertible {
    public var effect: Effect
    public var capabilities: Set<Capability>?
    public var modules: [ModulePattern]

    public init(effect: Effect, capabilities: Set<Capability>?, modules: [ModulePattern]) {
      self.effect = effect
      self.capabilities = capabilities
      self.modules = modules
    }

    /// Whether this rule decides `capability` for `moduleID`.
    public func matches(moduleID: String, capability: Capability) -> Bool {
      (capabilities?.contains(capability) ?? true) && modules.contains { $0.matches(moduleID) }
    }

    /// "deny networking for com.acme.*": the rule as the trace quotes it.
    public var description: String {
      let caps =
        capabilities.map { $0.sorted().map(\.rawValue).joined(separator: ", ") } ?? "every capability"
      let mods = modules.map(\.description).joined(separator: ", ")
      return "\(effect.rawValue) \(caps) for \(mods == "*" ? "every module" : mods)"
    }
  }

  /// The file the policy was read from, for the trace.
  public var path: String
  /// What a capability no rule matches gets.
  public var defaultEffect: Effect
  public var rules: [Rule]

  public init(path: String, defaultEffect: Effect, rules: [Rule]) {
    self.path = path
    self.defaultEffect = defaultEffect
    self.rules = rules
  }

  static let topFields = ["default", "rules"]
  static let ruleFields = ["effect", "capabilities", "modules"]

  /// Reads the file's JSON; `path` is only remembered, for the trace.
  public static func decode(_ value: JSONValue, path: String) -> Result<PolicyFile, PolicyFileError> {
    guard let top = value.objectValue else { return .failure(.notAnObject(rule: nil, found: value.typeName)) }
    for key in top.keys where !topFields.contains(key) {
      return .failure(.unknownField(rule: nil, field: key, valid: topFields))
    }
    guard let rawDefault = top["default"] else { return .failure(.missingField(rule: nil, field: "default")) }
    let defaultEffect: Effect
    switch effect(rawDefault, rule: nil, field: "default") {
    case .success(let e): defaultEffect = e
    case .failure(let e): return .failure(e)
    }
    guard let rawRules = top["rules"] else {
      return .success(PolicyFile(path: path, defaultEffect: defaultEffect, rules: []))
    }
    guard let list = rawRules.arrayValue else {
      return .failure(
        .wrongType(rule: nil, field: "rules", expected: "an array of rules", found: rawRules.typeName))
    }
    var rules: [Rule] = []
    for (offset, item) in list.enumerated() {
      switch rule(item, number: offset + 1) {
      case .success(let r): rules.append(r)
      case .failure(let e): return .failure(e)
      }
    }
    return .success(PolicyFile(path: path, defaultEffect: defaultEffect, rules: rules))
  }

  private static func rule(_ value: JSONValue, number: Int) -> Result<Rule, PolicyFileError> {
    guard let o = value.objectValue else {
      return .failure(.notAnObject(rule: number, found: value.typeName))
    }
    for key in o.keys where !ruleFields.contains(key) {
      return .failure(.unknownField(rule: number, field: key, valid: ruleFields))
    }
    for field in ruleFields where o[field] == nil {
      return .failure(.missingField(rule: number, field: field))
    }
    let effect: Effect
    switch Self.effect(o["effect"] ?? .null, rule: number, field: "effect") {
    case .success(let e): effect = e
    case .failure(let e): return .failure(e)
    }
    let capNames: [String]
    switch strings(o["capabilities"] ?? .null, rule: number, field: "capabilities") {
    case .success(let s): capNames = s
    case .failure(let e): return .failure(e)
    }
    var caps: Set<Capability>? = []
    for name in capNames {
      if name == "*" {
        caps = nil
        continue
      }
      guard let cap = Capability(rawValue: name) else {
        return .failure(
          .unknownCapability(rule: number, name: name, valid: Capability.allCases.map(\.rawValue).sorted()))
      }
      caps?.insert(cap)
    }
    let patterns: [String]
    switch strings(o["modules"] ?? .null, rule: number, field: "modules") {
    case .success(let s): patterns = s
    case .failure(let e): return .failure(e)
    }
    var modules: [ModulePattern] = []
    for p in patterns {
      switch modulePattern(p) {
      case .some(let m): modules.append(m)
      case .none: return .failure(.badModulePattern(rule: number, pattern: p))
      }
    }
    return .success(Rule(effect: effect, capabilities: caps, modules: modules))
  }

  /// `*`, `PREFIX.*` or a module ID; a `*` anywhere else is a mistake, not a glob.
  static func modulePattern(_ p: String) -> ModulePattern? {
    if p == "*" { return .any }
    if p.hasSuffix(".*") {
      let prefix = String(p.dropLast(2))
      guard !prefix.isEmpty, !prefix.contains("*"), !prefix.hasSuffix(".") else { return nil }
      return .prefix(prefix)
    }
    guard !p.contains("*") else { return nil }
    return .exact(p)
  }

  private static func effect(_ value: JSONValue, rule: Int?, field: String) -> Result<Effect, PolicyFileError>
  {
    guard let s = value.stringValue, let e = Effect(rawValue: s) else {
      return .failure(.badEffect(rule: rule, field: field, found: value.stringValue ?? value.typeName))
    }
    return .success(e)
  }

  private static func strings(_ value: JSONValue, rule: Int, field: String) -> Result<
    [String], PolicyFileError
  > {
    guard let list = value.arrayValue, !list.isEmpty else {
      return .failure(
        .wrongType(rule: rule, field: field, expected: "a non-empty array of strings", found: value.typeName))
    }
    var out: [String] = []
    for item in list {
      guard let s = item.stringValue, !s.isEmpty else {
        return .failure(
          .wrongType(rule: rule, field: field, expected: "a non-empty array of strings", found: item.typeName)
        )
      }
      out.append(s)
    }
    return .success(out)
  }
}

/// Why a policy file was refused: where in it (`rule` is 1-based, nil for the top level), the
/// field, the offending value, and what would be accepted.
public enum PolicyFileError: Error, Sendable, Equatable, CustomStringConvertible {
  case notAnObject(rule: Int?, found: String)
  case unknownField(rule: Int?, field: String, valid: [String])
  case missingField(rule: Int?, field: String)
  case wrongType(rule: Int?, field: String, expected: String, found: String)
  case badEffect(rule: Int?, field: String, found: String)
  case unknownCapability(rule: Int, name: String, valid: [String])
  case badModulePattern(rule: Int, pattern: String)

  public var description: String {
    switch self {
    case .notAnObject(let rule, let found):
      "\(Self.place(rule)): expected an object, found \(found)"
    case .unknownField(let rule, let field, let valid):
      "\(Self.place(rule)): unknown field \"\(field)\""
        + (Suggestion.closest(to: field, among: valid).map { "; did you mean \"\($0)\"?" } ?? "")
        + " (fields: \(valid.joined(separator: ", ")))"
    case .missingField(let rule, let field):
      "\(Self.place(rule)): field \"\(field)\" is missing; add it"
    case .wrongType(let rule, let field, let expected, let found):
      "\(Self.place(rule)), field \"\(field)\": expected \(expected), found \(found)"
    case .badEffect(let rule, let field, let found):
      "\(Self.place(rule)), field \"\(field)\": \"\(found)\" is neither \"allow\" nor \"deny\""
    case .unknownCapability(let rule, let name, let valid):
      "\(Self.place(rule)), field \"capabilities\": unknown capability \"\(name)\""
        + (Suggestion.closest(to: name, among: valid).map { "; did you mean \"\($0)\"?" } ?? "")
        + " (valid: \(valid.joined(separator: ", ")), or \"*\" for every one)"
    case .badModulePattern(let rule, let pattern):
      "\(Self.place(rule)), field \"modules\": \"\(pattern)\" is not a module ID, PREFIX.* or *"
    }
  }

  private static func place(_ rule: Int?) -> String { rule.map { "rule \($0)" } ?? "top level" }
}
