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
    // Short plain digit strings (every version number) are summed directly; the rest go
    // through Int's own parser.
    var n = 0
    var digits = 0
    for b in lexeme.utf8 {
      guard b &- UInt8(ascii: "0") < 10, digits < 18 else { digits = -1; break }
      n = n * 10 + Int(b &- UInt8(ascii: "0"))
      digits += 1
    }
    if digits > 0 { return n }
    guard !lexeme.utf8.contains(where: { $0 == UInt8(ascii: ".") || $0 | 0x20 == UInt8(ascii: "e") })
    else { return nil }
    return Int(lexeme)
  }

  public var isNull: Bool { self == .null }
}

/// A JSON object: ordered members with unique keys.
///
/// Small objects (all of a manifest's) are searched linearly: hashing every key cost more than
/// parsing the document. Past `indexThreshold` members a dictionary index is kept, so a hostile
/// object with many keys stays linear to build, not quadratic. Keys and values are kept in two
/// arrays so a search walks only the keys.
public struct JSONObject: Sendable, Equatable {
  public private(set) var keys: [String]
  /// The values, in the order of `keys`.
  public private(set) var values: [JSONValue]
  private var index: [String: Int]?

  static let indexThreshold = 16

  public init() {
    keys = []
    values = []
    index = nil
  }

  public init(_ pairs: [(String, JSONValue)]) {
    self.init()
    for (k, v) in pairs { self[k] = v }
  }

  /// The members in document order.
  public var members: [(key: String, value: JSONValue)] { zip(keys, values).map { ($0, $1) } }

  public var count: Int { keys.count }

  private func position(of key: String) -> Int? {
    if let index { return index[key] }
    // Comparing lengths first rejects almost every other key of a manifest without a string
    // comparison.
    let length = key.utf8.count
    for i in keys.indices where keys[i].utf8.count == length && keys[i] == key { return i }
    return nil
  }

  public subscript(key: String) -> JSONValue? {
    get { position(of: key).map { values[$0] } }
    set {
      if let i = position(of: key) {
        if let newValue { values[i] = newValue } else { remove(at: i) }
      } else if let newValue {
        append(key, newValue)
      }
    }
  }

  func contains(_ key: String) -> Bool { position(of: key) != nil }

  /// Adds a member whose key the caller knows is absent (the parser has just checked).
  mutating func appendNew(_ key: String, _ value: JSONValue) { append(key, value) }

  private mutating func append(_ key: String, _ value: JSONValue) {
    if keys.isEmpty {
      keys.reserveCapacity(8)
      values.reserveCapacity(8)
    }
    index?[key] = keys.count
    keys.append(key)
    values.append(value)
    if index == nil && keys.count > Self.indexThreshold { rebuildIndex() }
  }

  private mutating func rebuildIndex() {
    var d: [String: Int] = [:]
    d.reserveCapacity(keys.count * 2)
    for (n, k) in keys.enumerated() { d[k] = n }
    index = d
  }

  private mutating func remove(at i: Int) {
    keys.remove(at: i)
    values.remove(at: i)
    if index != nil { rebuildIndex() }
  }

  public static func == (a: JSONObject, b: JSONObject) -> Bool {
    a.keys == b.keys && a.values == b.values
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
