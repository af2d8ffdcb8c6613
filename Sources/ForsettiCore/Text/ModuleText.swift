/// The one rule for showing text a module wrote (its log lines, its health, its telemetry, a
/// crash report quoting it) to a person or in a file: which characters are never shown as they
/// are. A module's text must not move a terminal's cursor, start a line of its own, reorder what
/// follows it on screen or hide what precedes it, so every character that can is shown escaped.
/// Text output shows them as visible escapes (``visible(_:)``); JSON writes them as `\uXXXX`
/// (`JSONWriter`); the debug page's script applies the same classes (`app.js`, `visible`).
public enum ModuleText {
  /// Whether `u` is shown escaped: C0 (U+0000–U+001F), DEL (U+007F), C1 (U+0080–U+009F, which
  /// holds CSI U+009B and NEL U+0085), the line and paragraph separators (U+2028, U+2029) and
  /// the bidirectional controls (embeddings and overrides U+202A–U+202E, isolates U+2066–U+2069).
  @inlinable
  public static func isEscaped(_ u: Unicode.Scalar) -> Bool {
    switch u.value {
    // U+2028–U+202E is the two separators and the five embeddings and overrides, adjacent.
    case 0x00...0x1F, 0x7F...0x9F, 0x2028...0x202E, 0x2066...0x2069: true
    default: false
    }
  }

  /// `s` with every escaped character as a visible escape: `\n`, `\r`, `\t`, else `\u{hex}`
  /// (`\u{1b}`, `\u{9b}`, `\u{202e}`).
  public static func visible(_ s: String) -> String {
    guard s.unicodeScalars.contains(where: isEscaped) else { return s }
    var out = ""
    out.reserveCapacity(s.utf8.count + 16)
    for u in s.unicodeScalars {
      switch u {
      case "\n": out += "\\n"
      case "\r": out += "\\r"
      case "\t": out += "\\t"
      default:
        if isEscaped(u) { out += "\\u{\(String(u.value, radix: 16))}" } else { out.unicodeScalars.append(u) }
      }
    }
    return out
  }

  /// Whether `s` holds nothing ``isEscaped(_:)`` names: safe to show as it is.
  public static func isPlain(_ s: String) -> Bool { !s.unicodeScalars.contains(where: isEscaped) }
}
