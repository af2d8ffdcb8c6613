import ForsettiCore
import Foundation

/// A small JSON Schema (draft 2020-12) validator over `JSONValue`, for tests.
///
/// It supports only the keywords the manifest schema uses: `type`, `enum`, `const`, `required`,
/// `properties`, `additionalProperties`, `items`, `minItems`, `uniqueItems`, `pattern`, `minimum`,
/// `minLength`, `not`, `allOf`, `anyOf`, `oneOf`, `if`/`then`/`else` and `$ref` to `#` or
/// `#/$defs/…`, plus the annotations `$schema`, `$id`, `$comment`, `$defs`, `title`,
/// `description`, `default` and `examples`. Any other keyword anywhere in the schema is reported
/// as an error by every `validate` call, so a rule the validator does not understand can never
/// pass silently.
///
/// Semantics follow the specification where it matters for manifests: `integer` means a number
/// with no fractional part (so `1.0` is an integer, whatever the lexeme), numbers compare by
/// value in `enum`, `const` and `uniqueItems`, object equality ignores key order, `minLength`
/// counts Unicode scalars, and `pattern` is an unanchored search. Patterns run on
/// `NSRegularExpression` (ICU); to keep ECMA-262 meaning, an unescaped `$` outside a character
/// class is matched as the end of input only (ICU would also match before a final newline).
/// Stay within the common subset of the two dialects: no `\d`, `\w`, `\s` or nested classes.
struct JSONSchemaValidator {
  static let typeNames: Set<String> = ["null", "boolean", "object", "array", "number", "string", "integer"]

  let schema: JSONValue
  /// What is wrong with the schema itself (unsupported keywords, malformed keyword values,
  /// unresolvable `$ref`s, patterns that do not compile), found once over the whole schema.
  let schemaErrors: [String]

  init(schema: JSONValue) {
    self.schema = schema
    var errors: [String] = []
    Self.checkSchema(schema, at: "#", root: schema, into: &errors)
    schemaErrors = errors
  }

  /// Every reason `instance` fails the schema, each starting with a JSON path (`$`, `$.a.b[0]`);
  /// empty when it is valid. Schema errors are always included.
  func validate(_ instance: JSONValue) -> [String] {
    schemaErrors.map { "schema error: \($0)" }
      + Self.evaluate(instance, schema, path: "$", root: schema, depth: 0)
  }

  /// Whether `instance` is valid and the schema is fully supported.
  func isValid(_ instance: JSONValue) -> Bool { validate(instance).isEmpty }

  // MARK: checking the schema

  private static func checkSchema(_ s: JSONValue, at sp: String, root: JSONValue, into errors: inout [String])
  {
    if case .bool = s { return }
    guard let o = s.objectValue else {
      errors.append("\(sp): a schema must be an object or a boolean, found \(s.typeName)")
      return
    }
    for (key, value) in o.members {
      let kp = "\(sp)/\(key)"
      func sub(_ v: JSONValue, _ p: String) { checkSchema(v, at: p, root: root, into: &errors) }
      func fail(_ why: String) { errors.append("\(kp): \(why)") }
      switch key {
      case "$defs", "properties":
        guard let m = value.objectValue else { fail("must be an object of schemas"); continue }
        for (name, v) in m.members { sub(v, "\(kp)/\(name)") }
      case "additionalProperties", "items", "not", "if", "then", "else":
        sub(value, kp)
      case "allOf", "anyOf", "oneOf":
        guard let list = value.arrayValue, !list.isEmpty else {
          fail("must be a non-empty array of schemas"); continue
        }
        for (i, v) in list.enumerated() { sub(v, "\(kp)/\(i)") }
      case "type":
        let names = value.arrayValue ?? [value]
        if names.isEmpty || !names.allSatisfy({ $0.stringValue.map(typeNames.contains) ?? false }) {
          fail("must be a type name or a non-empty array of type names")
        }
      case "enum":
        if value.arrayValue == nil { fail("must be an array") }
      case "required":
        guard let list = value.arrayValue, list.allSatisfy({ $0.stringValue != nil }) else {
          fail("must be an array of strings")
          continue
        }
      case "minItems", "minLength":
        guard let n = value.integerValue, n >= 0 else { fail("must be a non-negative integer"); continue }
      case "minimum":
        if Decimal10(value) == nil { fail("must be a number") }
      case "uniqueItems":
        if value.boolValue == nil { fail("must be a boolean") }
      case "pattern":
        guard let p = value.stringValue else { fail("must be a string"); continue }
        if regex(p) == nil { fail("pattern \"\(p)\" does not compile") }
      case "$ref":
        guard let ref = value.stringValue else { fail("must be a string"); continue }
        if resolve(ref, in: root) == nil {
          fail("cannot resolve \"\(ref)\" (only \"#\" and \"#/$defs/…\" are supported)")
        }
      case "const", "$schema", "$id", "$comment", "title", "description", "default", "examples":
        continue
      default:
        fail("unsupported keyword \"\(key)\"")
      }
    }
  }

  private static func resolve(_ ref: String, in root: JSONValue) -> JSONValue? {
    if ref == "#" { return root }
    let prefix = "#/$defs/"
    guard ref.hasPrefix(prefix) else { return nil }
    let name = String(ref.dropFirst(prefix.count))
      .replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
    return root.objectValue?["$defs"]?.objectValue?[name]
  }

  // MARK: evaluating an instance

  private static let maxDepth = 64

  private static func evaluate(_ v: JSONValue, _ s: JSONValue, path: String, root: JSONValue, depth: Int)
    -> [String]
  {
    if case .bool(let b) = s { return b ? [] : ["\(path): the schema allows no value here"] }
    guard let o = s.objectValue else { return ["\(path): invalid schema (\(s.typeName))"] }
    guard depth < maxDepth else { return ["\(path): $ref nesting deeper than \(maxDepth)"] }
    func sub(_ v: JSONValue, _ s: JSONValue, _ p: String) -> [String] {
      evaluate(v, s, path: p, root: root, depth: depth + 1)
    }
    var errors: [String] = []
    func fail(_ why: String) { errors.append("\(path): \(why)") }

    if let t = o["type"] {
      let names = (t.arrayValue ?? [t]).compactMap(\.stringValue)
      if !names.contains(where: { hasType(v, $0) }) {
        fail("expected \(names.joined(separator: " or ")), found \(v.typeName)")
      }
    }
    if let list = o["enum"]?.arrayValue, !list.contains(where: { equal($0, v) }) {
      fail("\(describe(v)) is not one of \(list.map(describe).joined(separator: ", "))")
    }
    if let c = o["const"], !equal(c, v) {
      fail("expected \(describe(c)), found \(describe(v))")
    }
    if let r = o["$ref"]?.stringValue {
      if let target = resolve(r, in: root) {
        errors += sub(v, target, path)
      } else {
        fail("cannot resolve $ref \"\(r)\"")
      }
    }

    if let obj = v.objectValue {
      for name in o["required"]?.arrayValue?.compactMap(\.stringValue) ?? [] where obj[name] == nil {
        fail("missing required property \"\(name)\"")
      }
      let props = o["properties"]?.objectValue
      for (key, value) in obj.members {
        if let ps = props?[key] {
          errors += sub(value, ps, child(path, key))
        } else if let ap = o["additionalProperties"] {
          if case .bool(false) = ap {
            errors.append("\(child(path, key)): property \"\(key)\" is not allowed")
          } else {
            errors += sub(value, ap, child(path, key))
          }
        }
      }
    }

    if let items = v.arrayValue {
      if let min = o["minItems"]?.integerValue, items.count < min {
        fail("expected at least \(min) item(s), found \(items.count)")
      }
      if o["uniqueItems"]?.boolValue == true {
        for j in items.indices {
          if let i = items[..<j].firstIndex(where: { equal($0, items[j]) }) {
            errors.append("\(path)[\(j)]: duplicates item \(i) (\(describe(items[j])))")
          }
        }
      }
      if let itemSchema = o["items"] {
        for (i, item) in items.enumerated() { errors += sub(item, itemSchema, "\(path)[\(i)]") }
      }
    }

    if let str = v.stringValue {
      if let min = o["minLength"]?.integerValue, str.unicodeScalars.count < min {
        fail("expected at least \(min) character(s), found \(str.unicodeScalars.count)")
      }
      if let p = o["pattern"]?.stringValue {
        if let re = regex(p) {
          if re.firstMatch(in: str, range: NSRange(location: 0, length: str.utf16.count)) == nil {
            fail("\(describe(v)) does not match pattern \(p)")
          }
        } else {
          fail("pattern \(p) does not compile")
        }
      }
    }

    if let min = o["minimum"].flatMap(Decimal10.init), let n = Decimal10(v), n < min {
      fail("\(describe(v)) is below the minimum \(describe(o["minimum"] ?? .null))")
    }

    if let n = o["not"], sub(v, n, path).isEmpty {
      fail("must not match the schema under \"not\"")
    }
    for s in o["allOf"]?.arrayValue ?? [] { errors += sub(v, s, path) }
    if let alternatives = o["anyOf"]?.arrayValue {
      let results = alternatives.map { sub(v, $0, path) }
      if !results.contains(where: \.isEmpty) {
        fail(
          "matches none of the anyOf alternatives (\(results.map { $0.joined(separator: "; ") }.joined(separator: " | ")))"
        )
      }
    }
    if let alternatives = o["oneOf"]?.arrayValue {
      let results = alternatives.map { sub(v, $0, path) }
      let matched = results.filter(\.isEmpty).count
      if matched != 1 {
        fail(
          matched == 0
            ? "matches none of the oneOf alternatives (\(results.map { $0.joined(separator: "; ") }.joined(separator: " | ")))"
            : "matches \(matched) oneOf alternatives; exactly one is allowed")
      }
    }
    if let condition = o["if"] {
      if sub(v, condition, path).isEmpty {
        if let then = o["then"] { errors += sub(v, then, path) }
      } else if let otherwise = o["else"] {
        errors += sub(v, otherwise, path)
      }
    }
    return errors
  }

  private static func hasType(_ v: JSONValue, _ name: String) -> Bool {
    switch (name, v) {
    case ("null", .null), ("boolean", .bool), ("object", .object), ("array", .array), ("string", .string),
      ("number", .number):
      return true
    case ("integer", .number):
      return Decimal10(v)?.isInteger ?? false
    default:
      return false
    }
  }

  /// JSON equality as JSON Schema defines it: numbers by value, objects regardless of key order.
  static func equal(_ a: JSONValue, _ b: JSONValue) -> Bool {
    switch (a, b) {
    case (.null, .null): return true
    case (.bool(let x), .bool(let y)): return x == y
    case (.string(let x), .string(let y)): return x == y
    case (.number, .number): return Decimal10(a) == Decimal10(b)
    case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy { equal($0, $1) }
    case (.object(let x), .object(let y)):
      return x.keys.count == y.keys.count
        && x.members.allSatisfy { m in y[m.key].map { equal(m.value, $0) } ?? false }
    default: return false
    }
  }

  private static func child(_ path: String, _ key: String) -> String {
    let plain =
      key.first.map { $0.isLetter || $0 == "_" } == true
      && key.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" }
    return plain ? "\(path).\(key)" : "\(path)[\(describe(.string(key)))]"
  }

  private static func describe(_ v: JSONValue) -> String { JSONWriter.string(v) }

  /// Compiles an ECMA-262 pattern for ICU: an unescaped `$` outside a class becomes `\z`.
  static func regex(_ pattern: String) -> NSRegularExpression? {
    var out = ""
    var inClass = false
    var escaped = false
    for ch in pattern {
      if escaped {
        out.append(ch)
        escaped = false
        continue
      }
      switch ch {
      case "\\":
        escaped = true
        out.append(ch)
      case "[" where !inClass:
        inClass = true
        out.append(ch)
      case "]" where inClass:
        inClass = false
        out.append(ch)
      case "$" where !inClass:
        out += "\\z"
      default:
        out.append(ch)
      }
    }
    return try? NSRegularExpression(pattern: out)
  }
}

/// A JSON number as an exact decimal `digits × 10^exponent`, normalized so that equal values are
/// equal (no leading or trailing zeros in `digits`; zero has no digits and no sign).
private struct Decimal10: Equatable, Comparable {
  var negative: Bool
  var digits: [UInt8]
  var exponent: Int

  init?(_ v: JSONValue) {
    guard case .number(let lexeme) = v else { return nil }
    var text = Substring(lexeme)
    negative = text.hasPrefix("-")
    if negative { text = text.dropFirst() }
    var exp = 0
    if let e = text.firstIndex(where: { $0 == "e" || $0 == "E" }) {
      // Absurd exponents are clamped; they cannot matter for manifests.
      let written = text[text.index(after: e)...]
      exp = max(-1_000_000, min(1_000_000, Int(written) ?? (written.hasPrefix("-") ? -1_000_000 : 1_000_000)))
      text = text[..<e]
    }
    let parts = text.split(separator: ".", omittingEmptySubsequences: false)
    guard (1...2).contains(parts.count) else { return nil }
    let fraction = parts.count == 2 ? parts[1] : ""
    var ds = Array((parts[0] + fraction).utf8).map { $0 &- UInt8(ascii: "0") }
    guard ds.allSatisfy({ $0 <= 9 }) else { return nil }
    exp -= fraction.count
    while ds.first == 0 { ds.removeFirst() }
    while ds.last == 0 {
      ds.removeLast()
      exp += 1
    }
    if ds.isEmpty {
      negative = false
      exp = 0
    }
    digits = ds
    exponent = exp
  }

  var isInteger: Bool { digits.isEmpty || exponent >= 0 }

  static func < (a: Decimal10, b: Decimal10) -> Bool {
    if a.negative != b.negative { return a.negative }
    return a.negative ? magnitudeLess(b, a) : magnitudeLess(a, b)
  }

  private static func magnitudeLess(_ a: Decimal10, _ b: Decimal10) -> Bool {
    if a.digits.isEmpty || b.digits.isEmpty { return a.digits.isEmpty && !b.digits.isEmpty }
    let (ma, mb) = (a.digits.count + a.exponent, b.digits.count + b.exponent)
    if ma != mb { return ma < mb }
    for i in 0..<max(a.digits.count, b.digits.count) {
      let (x, y) = (i < a.digits.count ? a.digits[i] : 0, i < b.digits.count ? b.digits[i] : 0)
      if x != y { return x < y }
    }
    return false
  }
}
