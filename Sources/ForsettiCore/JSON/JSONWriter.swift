/// Serialises `JSONValue` deterministically: members in their stored order, pretty or compact.
public enum JSONWriter {
  /// The document as text; `pretty` uses two-space indentation and one member per line.
  public static func string(_ value: JSONValue, pretty: Bool = false) -> String {
    var out = ""
    write(value, into: &out, pretty: pretty, indent: 0)
    return out
  }

  private static func write(_ value: JSONValue, into out: inout String, pretty: Bool, indent: Int) {
    switch value {
    case .null: out += "null"
    case .bool(let b): out += b ? "true" : "false"
    case .number(let n): out += n
    case .string(let s): writeString(s, into: &out)
    case .array(let items):
      if items.isEmpty {
        out += "[]"
        return
      }
      out += "["
      for (i, item) in items.enumerated() {
        if i > 0 { out += "," }
        newline(&out, pretty: pretty, indent: indent + 1)
        write(item, into: &out, pretty: pretty, indent: indent + 1)
      }
      newline(&out, pretty: pretty, indent: indent)
      out += "]"
    case .object(let object):
      if object.members.isEmpty {
        out += "{}"
        return
      }
      out += "{"
      for (i, member) in object.members.enumerated() {
        if i > 0 { out += "," }
        newline(&out, pretty: pretty, indent: indent + 1)
        writeString(member.key, into: &out)
        out += pretty ? ": " : ":"
        write(member.value, into: &out, pretty: pretty, indent: indent + 1)
      }
      newline(&out, pretty: pretty, indent: indent)
      out += "}"
    }
  }

  private static func newline(_ out: inout String, pretty: Bool, indent: Int) {
    guard pretty else { return }
    out += "\n"
    out += String(repeating: "  ", count: indent)
  }

  private static func writeString(_ s: String, into out: inout String) {
    out += "\""
    for scalar in s.unicodeScalars {
      switch scalar {
      case "\"": out += "\\\""
      case "\\": out += "\\\\"
      case "\n": out += "\\n"
      case "\r": out += "\\r"
      case "\t": out += "\\t"
      case "\u{08}": out += "\\b"
      case "\u{0C}": out += "\\f"
      default:
        // Every character of the module-text rule as `\uXXXX` (all are in the BMP): the value is
        // kept, and the file's bytes hold none of them raw for a terminal or an editor to act on.
        if ModuleText.isEscaped(scalar) {
          let hex = String(scalar.value, radix: 16)
          out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        } else {
          out.unicodeScalars.append(scalar)
        }
      }
    }
    out += "\""
  }
}
