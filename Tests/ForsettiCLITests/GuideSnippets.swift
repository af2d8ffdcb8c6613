import Foundation

/// One fenced code block of `docs/author-guide.md` and the test directive before it.
///
/// The convention (documented at the top of AuthorGuideTests.swift): the line directly before
/// the opening fence is `<!-- test: KIND NAME [ARGUMENT] -->`. Markdown renders nothing for it.
struct GuideBlock: Sendable {
  /// 1-based line of the opening fence in the guide.
  var line: Int
  /// The fence's info string: `c`, `sh`, `swift`, `json`, or empty.
  var language: String
  /// `c-file`, `c-functions`, `c-replace`, `swift-file`, `json-edit`, `sh`, `output`; nil when
  /// the block has no directive.
  var kind: String?
  var name: String?
  var argument: String?
  /// The block's text, without its fences, ending in a newline.
  var text: String

  /// Where a failure points the reader: `docs/author-guide.md:LINE (KIND NAME)`.
  var location: String {
    "docs/author-guide.md:\(line) (\([kind, name].compactMap { $0 }.joined(separator: " ")))"
  }
}

/// What went wrong reading the guide's blocks.
enum GuideSnippetError: Error, CustomStringConvertible {
  case unclosedFence(line: Int)
  case badDirective(line: Int, text: String)

  var description: String {
    switch self {
    case .unclosedFence(let line): "docs/author-guide.md:\(line): a code fence is never closed"
    case .badDirective(let line, let text):
      "docs/author-guide.md:\(line): `\(text)` is not `<!-- test: KIND NAME [ARGUMENT] -->`"
    }
  }
}

/// Reads the fenced blocks of a Markdown text, with their directives.
enum GuideSnippets {
  static func parse(_ markdown: String) throws(GuideSnippetError) -> [GuideBlock] {
    let lines = markdown.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    var blocks: [GuideBlock] = []
    var i = 0
    while i < lines.count {
      guard lines[i].hasPrefix("```") else {
        i += 1
        continue
      }
      let open = i
      let language = String(lines[i].dropFirst(3)).trimmingCharacters(in: .whitespaces)
      var body: [String] = []
      i += 1
      while i < lines.count, lines[i] != "```" {
        body.append(lines[i])
        i += 1
      }
      guard i < lines.count else { throw .unclosedFence(line: open + 1) }
      i += 1
      var block = GuideBlock(
        line: open + 1, language: language, text: body.map { $0 + "\n" }.joined())
      if open > 0, let words = try directive(lines[open - 1], line: open) {
        block.kind = words.first
        block.name = words.count > 1 ? words[1] : nil
        block.argument = words.count > 2 ? words[2] : nil
      }
      blocks.append(block)
    }
    return blocks
  }

  /// The words after `test:` in `<!-- test: … -->`, nil for any other line.
  static func directive(_ text: String, line: Int) throws(GuideSnippetError) -> [String]? {
    let t = text.trimmingCharacters(in: .whitespaces)
    guard t.hasPrefix("<!-- test:") else { return nil }
    guard t.hasSuffix("-->") else { throw .badDirective(line: line, text: t) }
    let words = t.dropFirst("<!-- test:".count).dropLast(3).split(separator: " ").map(String.init)
    guard (1...3).contains(words.count) else { throw .badDirective(line: line, text: t) }
    return words
  }

  /// Names of the file-level `static` functions defined in C `source` (a line that starts with
  /// `static`, has no `=` or `;` before its `(`, and is not a prototype).
  static func staticFunctions(in source: String) -> [String] {
    var names: [String] = []
    for line in source.split(separator: "\n").map(String.init) where line.hasPrefix("static ") {
      guard let paren = line.firstIndex(of: "("), !line[..<paren].contains("="),
        !line.trimmingCharacters(in: .whitespaces).hasSuffix(";")
      else { continue }
      let head = line[..<paren]
      let name = head.reversed().prefix { $0.isLetter || $0.isNumber || $0 == "_" }.reversed()
      if !name.isEmpty, !head.contains("(*") { names.append(String(name)) }
    }
    return names
  }

  /// `source` with `function` (from its `static … function(` line to the next line that is
  /// `}`) replaced by `replacement`'s body, and `replacement`'s `#include` lines added after
  /// `source`'s own: what the guide tells the reader to do. Nil when `function` is not there.
  static func replacing(_ function: String, in source: String, with replacement: String) -> String? {
    var lines = source.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    guard
      let start = lines.firstIndex(where: { $0.hasPrefix("static ") && $0.contains(" \(function)(") }),
      let end = lines[start...].firstIndex(of: "}")
    else { return nil }
    let new = replacement.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    let includes = new.filter { $0.hasPrefix("#include") && !lines.contains($0) }
    let body = new.filter { !$0.hasPrefix("#include") }.drop { $0.isEmpty }
    lines.replaceSubrange(start...end, with: body.reversed().drop { $0.isEmpty }.reversed())
    let lastInclude = lines.lastIndex { $0.hasPrefix("#include") } ?? -1
    lines.insert(contentsOf: includes, at: lastInclude + 1)
    return lines.joined(separator: "\n")
  }

  /// `manifest` with the line that holds `member`'s key replaced by `member` (one
  /// `"key": value,` line of the guide), keeping the manifest's indentation.
  static func editing(_ manifest: String, with member: String) -> String? {
    let m = member.trimmingCharacters(in: .whitespacesAndNewlines)
    guard m.hasPrefix("\""), let close = m.dropFirst().firstIndex(of: "\"") else { return nil }
    let key = String(m[...close])
    var lines = manifest.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    guard let i = lines.firstIndex(where: { $0.trimmingCharacters(in: .whitespaces).hasPrefix(key + ":") })
    else { return nil }
    let indent = lines[i].prefix { $0 == " " }
    let keepComma = lines[i].hasSuffix(",")
    var value = m
    if value.hasSuffix(","), !keepComma { value.removeLast() }
    if !value.hasSuffix(","), keepComma { value += "," }
    lines[i] = indent + value
    return lines.joined(separator: "\n")
  }
}
