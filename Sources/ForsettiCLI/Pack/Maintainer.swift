import ForsettiRuntime

/// Who made a package: `Name <address>`, as Debian's Maintainer field and changelog want it.
enum Maintainer {
  /// From --maintainer, else DEBFULLNAME and DEBEMAIL (DEBEMAIL may be `Name <address>` on its
  /// own, as debchange accepts), else refused: lintian wants a real one.
  static func resolve(given: String?, environment: [String: String]) -> Result<String, PackError> {
    if let given { return check(given, source: "--maintainer") }
    let email = environment["DEBEMAIL"]?.trimmed() ?? ""
    let name = environment["DEBFULLNAME"]?.trimmed() ?? ""
    if email.contains("<") { return check(email, source: "DEBEMAIL") }
    guard !email.isEmpty, !name.isEmpty else { return .failure(.maintainer(given: nil, source: "")) }
    return check("\(name) <\(email)>", source: "DEBFULLNAME and DEBEMAIL")
  }

  /// `Name <local@domain>`: a name, then one address in angle brackets at the end, on one line.
  static func check(_ text: String, source: String) -> Result<String, PackError> {
    let value = clean(text)
    guard value == text.trimmed(), !value.isEmpty, value.last == ">",
      let open = value.lastIndex(of: "<")
    else { return .failure(.maintainer(given: text, source: source)) }
    let name = String(value[..<open]).trimmed()
    let address = value[value.index(after: open)..<value.index(before: value.endIndex)]
    let parts = address.split(separator: "@", omittingEmptySubsequences: false)
    guard !name.isEmpty, !name.contains("<"), !name.contains(">"), !name.contains(","), parts.count == 2,
      !parts[0].isEmpty, parts[1].contains("."), !address.contains(" "), !address.contains("<")
    else { return .failure(.maintainer(given: text, source: source)) }
    return .success("\(name) <\(address)>")
  }

  /// The name part, for the copyright line.
  static func name(_ maintainer: String) -> String {
    maintainer.lastIndex(of: "<").map { String(maintainer[..<$0]).trimmed() } ?? maintainer
  }

  /// Refuses control characters (a newline would start a new field) by making them differ.
  private static func clean(_ s: String) -> String {
    String(s.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.map(Character.init))
      .trimmed()
  }
}
