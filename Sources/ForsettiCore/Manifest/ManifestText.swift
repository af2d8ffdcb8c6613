/// The text rules of manifest fields, shared by the full decoder and its fast path.
///
/// They work on UTF-8 bytes: every non-ASCII byte fails them, exactly as a non-ASCII Character
/// would, without the cost of grapheme breaking.
enum ManifestText {
  static func isLetter(_ b: UInt8) -> Bool {
    (b | 0x20) >= UInt8(ascii: "a") && (b | 0x20) <= UInt8(ascii: "z")
  }
  static func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }

  /// Two or more dot-separated parts, each starting with an ASCII letter, then letters, digits
  /// and (after the first part) hyphens.
  static func isModuleID(_ id: String) -> Bool {
    var dots = 0
    var atPartStart = true
    for b in id.utf8 {
      if b == UInt8(ascii: ".") {
        if atPartStart { return false }
        dots += 1
        atPartStart = true
      } else if atPartStart {
        guard isLetter(b) else { return false }
        atPartStart = false
      } else {
        guard isLetter(b) || isDigit(b) || (dots > 0 && b == UInt8(ascii: "-")) else { return false }
      }
    }
    return dots >= 1 && !atPartStart
  }

  static func isCIdentifier(_ s: String) -> Bool {
    var first = true
    for b in s.utf8 {
      guard isLetter(b) || b == UInt8(ascii: "_") || (!first && isDigit(b)) else { return false }
      first = false
    }
    return !first
  }

  /// Whether `s` is empty or only whitespace. Any printable ASCII byte settles it at once; only
  /// strings without one pay for the Unicode check.
  static func isBlank(_ s: String) -> Bool {
    for b in s.utf8 where b > 0x20 && b < 0x7F { return false }
    return s.allSatisfy(\.isWhitespace)
  }
}
