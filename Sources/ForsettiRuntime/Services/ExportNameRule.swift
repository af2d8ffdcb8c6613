/// The characters an export name may not hold: a file named with them would reach the operator's
/// terminal, file manager or script as something other than what it is (a line break in `ls`,
/// an escape sequence, text that reads right to left). Whole bytes are judged, before the name
/// is cut to its last component.
enum ExportNameRule {
  /// Why a name was refused.
  enum Refusal: Sendable, Equatable, CustomStringConvertible {
    case notUTF8
    /// C0 (U+0000–U+001F), DEL or C1 (U+0080–U+009F).
    case controlCharacter
    /// U+2028 or U+2029.
    case lineSeparator
    /// U+202A–U+202E or U+2066–U+2069.
    case bidiControl

    var description: String {
      switch self {
      case .notUTF8: "it holds bytes that are not UTF-8"
      case .controlCharacter: "it holds a control character (C0, DEL or C1)"
      case .lineSeparator: "it holds a line or paragraph separator (U+2028, U+2029)"
      case .bidiControl: "it holds a bidirectional control (U+202A–U+202E, U+2066–U+2069)"
      }
    }
  }

  /// What is wrong with `raw` as an export name, or nil when nothing is.
  static func refusal(_ raw: [UInt8]) -> Refusal? {
    guard let text = String(validating: raw, as: UTF8.self) else { return .notUTF8 }
    for u in text.unicodeScalars {
      if let why = refusal(u) { return why }
    }
    return nil
  }

  static func refusal(_ u: Unicode.Scalar) -> Refusal? {
    switch u.value {
    case 0...0x1F, 0x7F...0x9F: .controlCharacter
    case 0x2028, 0x2029: .lineSeparator
    case 0x202A...0x202E, 0x2066...0x2069: .bidiControl
    default: nil
    }
  }

  /// `raw` as an operator may safely see it: refused characters as `\u{…}` (`\n`, `\t`, `\r`),
  /// bytes that are not UTF-8 as `\xNN`, a backslash doubled.
  static func shown(_ raw: [UInt8]) -> String {
    var out = ""
    var bytes = raw.makeIterator()
    var parser = Unicode.UTF8.ForwardParser()
    var offset = 0
    while true {
      switch parser.parseScalar(from: &bytes) {
      case .valid(let encoded):
        offset += encoded.count
        let u = Unicode.UTF8.decode(encoded)
        switch u {
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case "\\": out += "\\\\"
        default: out += refusal(u) == nil ? String(u) : "\\u{\(String(u.value, radix: 16))}"
        }
      case .error(let length):
        for b in raw[offset..<min(raw.count, offset + length)] {
          out += "\\x" + (b < 0x10 ? "0" : "") + String(b, radix: 16)
        }
        offset += length
      case .emptyInput:
        return out
      }
    }
  }
}
