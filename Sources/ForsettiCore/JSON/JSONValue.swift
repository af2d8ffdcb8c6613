/// A parsed JSON document that keeps object key order and number lexemes exactly as written.
public enum JSONValue: Sendable, Equatable {
  case null
  case bool(Bool)
  /// The number's lexeme as written, so `1` and `1.0` stay distinguishable.
  case number(String)
  case string(String)
  case array([JSONValue])
  case object(JSONObject)

  /// A short name of the value's JSON type, for error messages ("expected string, found number").
  public var typeName: String {
    switch self {
    case .null: "null"
    case .bool: "boolean"
    case .number: "number"
    case .string: "string"
    case .array: "array"
    case .object: "object"
    }
  }

  public var stringValue: String? {
    if case .string(let s) = self { return s }
    return nil
  }

  public var objectValue: JSONObject? {
    if case .object(let o) = self { return o }
    return nil
  }

  public var arrayValue: [JSONValue]? {
    if case .array(let a) = self { return a }
    return nil
  }

  public var boolValue: Bool? {
    if case .bool(let b) = self { return b }
    return nil
  }

  /// The value as an integer when it is a number written without fraction or exponent.
  public var integerValue: Int? {
    guard case .number(let lexeme) = self else { return nil }
    guard !lexeme.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) else { return nil }
    return Int(lexeme)
  }

  public var isNull: Bool { self == .null }
}

/// A JSON object: ordered members with unique keys.
///
/// Small objects (all of a manifest's) are searched linearly: hashing every key cost more than
/// parsing the document. Past `indexThreshold` members a dictionary index is kept, so a hostile
/// object with many keys stays linear to build, not quadratic.
public struct JSONObject: Sendable, Equatable {
  public private(set) var members: [(key: String, value: JSONValue)]
  private var index: [String: Int]?

  static let indexThreshold = 16

  public init() {
    members = []
    index = nil
  }

  public init(_ pairs: [(String, JSONValue)]) {
    self.init()
    for (k, v) in pairs { self[k] = v }
  }

  public var keys: [String] { members.map(\.key) }

  private func position(of key: String) -> Int? {
    if let index { return index[key] }
    return members.firstIndex { $0.key == key }
  }

  public subscript(key: String) -> JSONValue? {
    get { position(of: key).map { members[$0].value } }
    set {
      if let i = position(of: key) {
        if let newValue { members[i].value = newValue } else { remove(at: i) }
      } else if let newValue {
        index?[key] = members.count
        members.append((key, newValue))
        if index == nil && members.count > Self.indexThreshold { rebuildIndex() }
      }
    }
  }

  private mutating func rebuildIndex() {
    var d: [String: Int] = [:]
    d.reserveCapacity(members.count * 2)
    for (n, m) in members.enumerated() { d[m.key] = n }
    index = d
  }

  private mutating func remove(at i: Int) {
    members.remove(at: i)
    if index != nil { rebuildIndex() }
  }

  public static func == (a: JSONObject, b: JSONObject) -> Bool {
    a.members.count == b.members.count
      && zip(a.members, b.members).allSatisfy { $0.key == $1.key && $0.value == $1.value }
  }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
  ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
  public init(stringLiteral value: String) { self = .string(value) }
  public init(booleanLiteral value: Bool) { self = .bool(value) }
  public init(integerLiteral value: Int) { self = .number(String(value)) }
  public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
  public init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(JSONObject(elements)) }
  public init(nilLiteral: ()) { self = .null }
}

extension JSONValue {
  /// An optional string as JSON: the string, or `null`.
  public static func string(orNull s: String?) -> JSONValue { s.map(JSONValue.string) ?? .null }
  /// An array of strings as JSON.
  public static func strings(_ list: [String]) -> JSONValue { .array(list.map(JSONValue.string)) }
}
