/// Text made safe for roff input (man(7) pages): what the declarations say is printed, never
/// read as a request or an escape.
enum Roff {
  /// Running text: a backslash is printed as one (`\(rs`), a hyphen as the minus sign options
  /// are typed with (`\-`, which also keeps `--name` from being broken across lines), and any
  /// other non-ASCII character by its code point (groff reads its input as Latin-1).
  static func escape(_ s: String) -> String {
    var out = ""
    for scalar in s.unicodeScalars {
      switch scalar {
      case "\\": out += "\\(rs"
      case "-": out += "\\-"
      case _ where scalar.value > 0x7E || (scalar.value < 0x20 && scalar != "\t"):
        let hex = String(scalar.value, radix: 16, uppercase: true)
        out += "\\[u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex + "]"
      default: out.unicodeScalars.append(scalar)
      }
    }
    return out
  }

  /// A line of input: escaped, and a leading `.` or `'` (which would make it a request) made
  /// ordinary text with the zero-width `\&`.
  static func line(_ s: String) -> String {
    let e = escape(s)
    return e.hasPrefix(".") || e.hasPrefix("'") ? "\\&" + e : e
  }

  static func bold(_ s: String) -> String { "\\fB" + escape(s) + "\\fR" }
  static func italic(_ s: String) -> String { "\\fI" + escape(s) + "\\fR" }

  /// Paragraphs as written in a declaration: blank lines separate them; a paragraph with an
  /// indented line is a layout (a table of forms, an example) and is kept line for line.
  static func paragraphs(_ text: String) -> String {
    var out = ""
    var block: [Substring] = []
    func flush() {
      defer { block = [] }
      guard !block.isEmpty else { return }
      out += ".PP\n"
      if block.contains(where: { $0.first?.isWhitespace == true }) {
        out += ".nf\n"
        for l in block { out += "\\&" + escape(String(l)) + "\n" }
        out += ".fi\n"
      } else {
        for l in block { out += line(String(l.drop { $0 == " " })) + "\n" }
      }
    }
    for l in text.split(separator: "\n", omittingEmptySubsequences: false) {
      if l.allSatisfy(\.isWhitespace) { flush() } else { block.append(l) }
    }
    flush()
    return out
  }
}
