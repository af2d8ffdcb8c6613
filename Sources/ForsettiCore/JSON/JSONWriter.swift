/// Serialises `JSONValue` deterministically: members in their stored order, pretty or compact.
///
/// Written as UTF-8 bytes into one growing buffer and made a `String` once: appending to a
/// `String` piece by piece was most of `check --json`'s time (each append re-checks the
/// string's capacity, ASCII-ness and breadcrumbs).
public enum JSONWriter {
  /// The document as text; `pretty` uses two-space indentation and one member per line.
  public static func string(_ value: JSONValue, pretty: Bool = false) -> String {
    String(decoding: bytes(value, pretty: pretty), as: UTF8.self)
  }

  /// The document as UTF-8 bytes, exactly those of `string(value, pretty:)`.
  public static func bytes(_ value: JSONValue, pretty: Bool = false) -> [UInt8] {
    var out = Output(pretty: pretty)
    out.write(value, indent: 0)
    return out.bytes
  }

  private struct Output {
    var bytes: [UInt8] = []
    let pretty: Bool

    init(pretty: Bool) {
      self.pretty = pretty
      bytes.reserveCapacity(256)
    }

    mutating func write(_ value: JSONValue, indent: Int) {
      switch value {
      case .null: ascii("null")
      case .bool(let b): ascii(b ? "true" : "false")
      case .number(let n): bytes.append(contentsOf: n.utf8)
      case .string(let s): string(s)
      case .array(let items):
        guard !items.isEmpty else { return ascii("[]") }
        bytes.append(UInt8(ascii: "["))
        for i in items.indices {
          if i > items.startIndex { bytes.append(UInt8(ascii: ",")) }
          newline(indent + 1)
          write(items[i], indent: indent + 1)
        }
        newline(indent)
        bytes.append(UInt8(ascii: "]"))
      case .object(let object):
        // Keys and values walked side by side: `members` would build an array of pairs.
        let (keys, values) = (object.keys, object.values)
        guard !keys.isEmpty else { return ascii("{}") }
        bytes.append(UInt8(ascii: "{"))
        for i in keys.indices {
          if i > 0 { bytes.append(UInt8(ascii: ",")) }
          newline(indent + 1)
          string(keys[i])
          ascii(pretty ? ": " : ":")
          write(values[i], indent: indent + 1)
        }
        newline(indent)
        bytes.append(UInt8(ascii: "}"))
      }
    }

    private mutating func ascii(_ s: StaticString) {
      s.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    private mutating func newline(_ indent: Int) {
      guard pretty else { return }
      bytes.append(UInt8(ascii: "\n"))
      bytes.append(contentsOf: repeatElement(UInt8(ascii: " "), count: 2 * indent))
    }

    /// `s` quoted. Runs of bytes that need no escape are copied whole; the escaped characters
    /// are found on the UTF-8 bytes (the string is valid UTF-8, so a lead byte is followed by
    /// its continuation bytes).
    private mutating func string(_ s: String) {
      bytes.append(UInt8(ascii: "\""))
      var s = s
      s.withUTF8 { utf8 in
        var run = 0
        var i = 0
        while i < utf8.count {
          let b = utf8[i]
          if b >= 0x20 && b < 0x7F && b != UInt8(ascii: "\"") && b != UInt8(ascii: "\\") {
            i += 1
            continue
          }
          let (escaped, length) = Self.escape(utf8, at: i)
          guard let escaped else {
            i += length
            continue
          }
          bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<i]))
          bytes.append(contentsOf: escaped.utf8)
          i += length
          run = i
        }
        bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<utf8.count]))
      }
      bytes.append(UInt8(ascii: "\""))
    }

    /// The escape of the character starting at `i`, if it needs one, and its length in bytes.
    /// Escaped are `"` and `\` and every character of the module-text rule
    /// (`ModuleText.isEscaped`: C0 and C1 controls, DEL, U+2028–U+202E, U+2066–U+2069), as
    /// `\uXXXX` unless JSON has a shorter escape: the value is kept, and the output holds none
    /// of them raw for a terminal or an editor to act on.
    private static func escape(_ utf8: UnsafeBufferPointer<UInt8>, at i: Int) -> (String?, Int) {
      let b = utf8[i]
      switch b {
      case UInt8(ascii: "\""): return ("\\\"", 1)
      case UInt8(ascii: "\\"): return ("\\\\", 1)
      case UInt8(ascii: "\n"): return ("\\n", 1)
      case UInt8(ascii: "\r"): return ("\\r", 1)
      case UInt8(ascii: "\t"): return ("\\t", 1)
      case 0x08: return ("\\b", 1)
      case 0x0C: return ("\\f", 1)
      case 0x00..<0x20, 0x7F: return (unicode(UInt32(b)), 1)
      case 0x20..<0x80: return (nil, 1)
      case 0xC2:
        // U+0080–U+009F: C2 80 … C2 9F.
        guard i + 1 < utf8.count, (0x80...0x9F).contains(utf8[i + 1]) else { return (nil, 1) }
        return (unicode(UInt32(utf8[i + 1])), 2)
      case 0xE2:
        // U+2028–U+202E: E2 80 A8 … AE; U+2066–U+2069: E2 81 A6 … A9.
        guard i + 2 < utf8.count else { return (nil, 1) }
        let (b1, b2) = (utf8[i + 1], utf8[i + 2])
        guard (b1 == 0x80 && (0xA8...0xAE).contains(b2)) || (b1 == 0x81 && (0xA6...0xA9).contains(b2))
        else { return (nil, 1) }
        return (unicode(0x2000 | UInt32(b1 & 0x3F) << 6 | UInt32(b2 & 0x3F)), 3)
      default: return (nil, 1)
      }
    }

    private static func unicode(_ value: UInt32) -> String {
      let hex = String(value, radix: 16)
      return "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
    }
  }
}
