/// NSString's path arithmetic and padding on plain strings: NSString is Foundation's, and
/// Foundation costs every start of the host its libraries (ICU among them), relocations and
/// memory. Shared by the runtime and the command line.
package enum PathText {
  /// `a` and `b` joined by one slash, as NSString's appendingPathComponent joins them.
  package static func join(_ a: String, _ b: String) -> String {
    if a.isEmpty { return b }
    if b.isEmpty { return a }
    return a.hasSuffix("/") ? a + b : a + "/" + b
  }

  /// The path without its last component, as NSString's deletingLastPathComponent: `a/b/` → `a`,
  /// `b` → ``, `/b` → `/`.
  package static func parent(_ path: String) -> String {
    var bytes = Array(path.utf8)
    while bytes.count > 1, bytes.last == UInt8(ascii: "/") { bytes.removeLast() }
    guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return "" }
    var parent = bytes[..<slash]
    while parent.count > 1, parent.last == UInt8(ascii: "/") { parent.removeLast() }
    return parent.isEmpty ? "/" : String(decoding: parent, as: UTF8.self)
  }

  /// Whether `path` is `ancestor` or beneath it, component by component (`/a/bc` is not within
  /// `/a/b`). Both are taken as written: resolve links first.
  package static func isWithin(_ path: String, _ ancestor: String) -> Bool {
    let a = ancestor.hasSuffix("/") && ancestor.count > 1 ? String(ancestor.dropLast()) : ancestor
    let p = path.hasSuffix("/") && path.count > 1 ? String(path.dropLast()) : path
    if a == "/" { return p.hasPrefix("/") }
    return p == a || p.hasPrefix(a + "/")
  }

  /// The last component, as NSString's lastPathComponent: `a/b/` → `b`, `/` → `/`.
  package static func name(_ path: String) -> String {
    var bytes = Array(path.utf8)
    while bytes.count > 1, bytes.last == UInt8(ascii: "/") { bytes.removeLast() }
    guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else {
      return String(decoding: bytes, as: UTF8.self)
    }
    return bytes.count == 1 ? "/" : String(decoding: bytes[(slash + 1)...], as: UTF8.self)
  }
}

extension String {
  /// Exactly `width` characters: cut, or padded with spaces (NSString's padding(toLength:) with " ").
  package func padded(to width: Int) -> String {
    count >= width ? String(prefix(width)) : self + String(repeating: " ", count: width - count)
  }
}

extension StringProtocol {
  /// Without leading and trailing blanks, newlines kept (trimmingCharacters(in: .whitespaces)).
  package func trimmed() -> String {
    let blank: (Character) -> Bool = { $0.isWhitespace && !$0.isNewline }
    guard let first = firstIndex(where: { !blank($0) }), let last = lastIndex(where: { !blank($0) }) else {
      return ""
    }
    return String(self[first...last])
  }
}
