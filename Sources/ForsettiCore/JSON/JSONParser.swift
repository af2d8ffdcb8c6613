/// Why a JSON document could not be parsed, and where (1-based line and column).
public struct JSONSyntaxError: Error, Sendable, Hashable, CustomStringConvertible {
  public var line: Int
  public var column: Int
  public var problem: String

  public var description: String { "line \(line), column \(column): \(problem)" }
}

/// A strict RFC 8259 parser for untrusted input: rejects duplicate keys, invalid UTF-8,
/// control characters in strings and nesting deeper than `maxDepth`, so a hostile file
/// produces an error, never a crash.
///
/// It reads through an unsafe view of the caller's bytes, valid only during `parse`: manifests
/// are parsed by the thousand at discovery, and array access with bounds and exclusivity checks
/// on every byte cost more than the parse itself.
public struct JSONParser {
  public static let defaultMaxDepth = 128

  private let bytes: UnsafeBufferPointer<UInt8>
  private var pos = 0
  private let maxDepth: Int

  private init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
    self.bytes = bytes
    self.maxDepth = maxDepth
  }

  /// Parses one complete JSON document.
  public static func parse(_ bytes: [UInt8], maxDepth: Int = defaultMaxDepth) throws(JSONSyntaxError)
    -> JSONValue
  {
    let result: Result<JSONValue, JSONSyntaxError> = bytes.withUnsafeBufferPointer { buffer in
      var p = JSONParser(bytes: buffer, maxDepth: maxDepth)
      return Result { () throws(JSONSyntaxError) in try p.document() }
    }
    return try result.get()
  }

  private mutating func document() throws(JSONSyntaxError) -> JSONValue {
    if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { pos = 3 }
    skipWhitespace()
    let value = try parseValue(depth: 0)
    skipWhitespace()
    if pos < bytes.count {
      throw error("unexpected \(describeCurrent()) after the end of the document")
    }
    return value
  }

  /// Parses a document given as a Swift string.
  public static func parse(_ text: String) throws(JSONSyntaxError) -> JSONValue {
    try parse(Array(text.utf8))
  }

  private func error(_ problem: String, at offset: Int? = nil) -> JSONSyntaxError {
    let end = min(offset ?? pos, bytes.count)
    var line = 1
    var column = 1
    var i = 0
    while i < end {
      if bytes[i] == UInt8(ascii: "\n") {
        line += 1
        column = 1
      } else if bytes[i] & 0xC0 != 0x80 {
        column += 1
      }
      i += 1
    }
    return JSONSyntaxError(line: line, column: column, problem: problem)
  }

  private func describeCurrent() -> String {
    guard pos < bytes.count else { return "end of file" }
    let b = bytes[pos]
    if b >= 0x21 && b < 0x7F { return "'\(Character(Unicode.Scalar(b)))'" }
    return "byte 0x\(String(b, radix: 16, uppercase: true))"
  }

  private mutating func skipWhitespace() {
    while pos < bytes.count {
      switch bytes[pos] {
      case 0x20, 0x0A, 0x0D, 0x09: pos += 1
      default: return
      }
    }
  }

  private mutating func parseValue(depth: Int) throws(JSONSyntaxError) -> JSONValue {
    guard pos < bytes.count else { throw error("unexpected end of file, expected a value") }
    switch bytes[pos] {
    case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
    case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
    case UInt8(ascii: "\""): return .string(try parseString())
    case UInt8(ascii: "t"): try expectWord("true"); return .bool(true)
    case UInt8(ascii: "f"): try expectWord("false"); return .bool(false)
    case UInt8(ascii: "n"): try expectWord("null"); return .null
    case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
    default: throw error("unexpected \(describeCurrent()), expected a value")
    }
  }

  private mutating func expectWord(_ word: StaticString) throws(JSONSyntaxError) {
    let w = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
    guard pos + w.count <= bytes.count, bytes[pos..<pos + w.count].elementsEqual(w) else {
      throw error("unexpected \(describeCurrent()), expected a value")
    }
    pos += w.count
  }

  private mutating func parseObject(depth: Int) throws(JSONSyntaxError) -> JSONValue {
    if depth > maxDepth { throw error("nesting deeper than \(maxDepth) levels") }
    pos += 1
    var object = JSONObject()
    skipWhitespace()
    if pos < bytes.count && bytes[pos] == UInt8(ascii: "}") {
      pos += 1
      return .object(object)
    }
    while true {
      skipWhitespace()
      guard pos < bytes.count, bytes[pos] == UInt8(ascii: "\"") else {
        throw error("unexpected \(describeCurrent()), expected a string key")
      }
      let keyStart = pos
      let key = try parseString()
      if object.contains(key) { throw error("duplicate key \"\(key)\"", at: keyStart) }
      skipWhitespace()
      guard pos < bytes.count, bytes[pos] == UInt8(ascii: ":") else {
        throw error("unexpected \(describeCurrent()), expected ':' after key \"\(key)\"")
      }
      pos += 1
      skipWhitespace()
      object.appendNew(key, try parseValue(depth: depth))
      skipWhitespace()
      guard pos < bytes.count else { throw error("unexpected end of file, expected ',' or '}'") }
      if bytes[pos] == UInt8(ascii: ",") {
        pos += 1
        continue
      }
      if bytes[pos] == UInt8(ascii: "}") {
        pos += 1
        return .object(object)
      }
      throw error("unexpected \(describeCurrent()), expected ',' or '}'")
    }
  }

  private mutating func parseArray(depth: Int) throws(JSONSyntaxError) -> JSONValue {
    if depth > maxDepth { throw error("nesting deeper than \(maxDepth) levels") }
    pos += 1
    var items: [JSONValue] = []
    skipWhitespace()
    if pos < bytes.count && bytes[pos] == UInt8(ascii: "]") {
      pos += 1
      return .array(items)
    }
    while true {
      skipWhitespace()
      items.append(try parseValue(depth: depth))
      skipWhitespace()
      guard pos < bytes.count else { throw error("unexpected end of file, expected ',' or ']'") }
      if bytes[pos] == UInt8(ascii: ",") {
        pos += 1
        continue
      }
      if bytes[pos] == UInt8(ascii: "]") {
        pos += 1
        return .array(items)
      }
      throw error("unexpected \(describeCurrent()), expected ',' or ']'")
    }
  }

  private mutating func parseNumber() throws(JSONSyntaxError) -> JSONValue {
    let start = pos
    func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
    if bytes[pos] == UInt8(ascii: "-") { pos += 1 }
    guard pos < bytes.count, isDigit(bytes[pos]) else { throw error("invalid number: expected a digit") }
    if bytes[pos] == UInt8(ascii: "0") {
      pos += 1
      if pos < bytes.count && isDigit(bytes[pos]) { throw error("invalid number: leading zero") }
    } else {
      while pos < bytes.count && isDigit(bytes[pos]) { pos += 1 }
    }
    if pos < bytes.count && bytes[pos] == UInt8(ascii: ".") {
      pos += 1
      guard pos < bytes.count, isDigit(bytes[pos]) else {
        throw error("invalid number: expected a digit after '.'")
      }
      while pos < bytes.count && isDigit(bytes[pos]) { pos += 1 }
    }
    if pos < bytes.count && (bytes[pos] == UInt8(ascii: "e") || bytes[pos] == UInt8(ascii: "E")) {
      pos += 1
      if pos < bytes.count && (bytes[pos] == UInt8(ascii: "+") || bytes[pos] == UInt8(ascii: "-")) {
        pos += 1
      }
      guard pos < bytes.count, isDigit(bytes[pos]) else {
        throw error("invalid number: expected a digit in the exponent")
      }
      while pos < bytes.count && isDigit(bytes[pos]) { pos += 1 }
    }
    return .number(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<pos]), as: UTF8.self))
  }

  private mutating func parseString() throws(JSONSyntaxError) -> String {
    let open = pos
    pos += 1
    // Fast path: most strings have no escapes and no control characters; validate the slice
    // in one go instead of copying byte by byte.
    var end = pos
    var high: UInt8 = 0
    while end < bytes.count {
      let b = bytes[end]
      if b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") || b < 0x20 { break }
      high |= b
      end += 1
    }
    if end < bytes.count, bytes[end] == UInt8(ascii: "\"") {
      let slice = UnsafeBufferPointer(rebasing: bytes[pos..<end])
      pos = end + 1
      // ASCII needs no validation; the generic validating initialiser is for the rest.
      if high < 0x80 { return String(decoding: slice, as: UTF8.self) }
      guard let s = String(validating: slice, as: UTF8.self) else {
        throw error("string is not valid UTF-8", at: open)
      }
      return s
    }
    var out: [UInt8] = Array(bytes[pos..<end])
    pos = end
    while true {
      guard pos < bytes.count else { throw error("unterminated string", at: open) }
      let b = bytes[pos]
      switch b {
      case UInt8(ascii: "\""):
        pos += 1
        guard let s = String(validating: out, as: UTF8.self) else {
          throw error("string is not valid UTF-8", at: open)
        }
        return s
      case UInt8(ascii: "\\"):
        pos += 1
        guard pos < bytes.count else { throw error("unterminated string", at: open) }
        let e = bytes[pos]
        pos += 1
        switch e {
        case UInt8(ascii: "\""): out.append(0x22)
        case UInt8(ascii: "\\"): out.append(0x5C)
        case UInt8(ascii: "/"): out.append(0x2F)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"):
          let scalar = try parseUnicodeEscape()
          out.append(contentsOf: Array(String(Character(scalar)).utf8))
        default:
          throw error("invalid escape '\\\(Character(Unicode.Scalar(e)))'", at: pos - 2)
        }
      case 0x00..<0x20:
        let hex = String(b, radix: 16)
        throw error(
          "control character in string (escape it as \\u\(String(repeating: "0", count: 4 - hex.count))\(hex))"
        )
      default:
        out.append(b)
        pos += 1
      }
    }
  }

  private mutating func parseHex4() throws(JSONSyntaxError) -> UInt32 {
    guard pos + 4 <= bytes.count else { throw error("truncated \\u escape") }
    var v: UInt32 = 0
    for _ in 0..<4 {
      let b = bytes[pos]
      let d: UInt32
      switch b {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(b - UInt8(ascii: "0"))
      case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(b - UInt8(ascii: "a") + 10)
      case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(b - UInt8(ascii: "A") + 10)
      default: throw error("invalid hex digit in \\u escape")
      }
      v = v << 4 | d
      pos += 1
    }
    return v
  }

  private mutating func parseUnicodeEscape() throws(JSONSyntaxError) -> Unicode.Scalar {
    let start = pos - 2
    let high = try parseHex4()
    if (0xD800...0xDBFF).contains(high) {
      guard pos + 2 <= bytes.count, bytes[pos] == UInt8(ascii: "\\"), bytes[pos + 1] == UInt8(ascii: "u")
      else { throw error("unpaired surrogate in \\u escape", at: start) }
      pos += 2
      let low = try parseHex4()
      guard (0xDC00...0xDFFF).contains(low),
        let s = Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
      else { throw error("unpaired surrogate in \\u escape", at: start) }
      return s
    }
    guard let s = Unicode.Scalar(high) else { throw error("unpaired surrogate in \\u escape", at: start) }
    return s
  }
}
