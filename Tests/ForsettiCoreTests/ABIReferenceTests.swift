import Foundation
import Testing

/// docs/abi.md names, in backticks, every `FORSETTI_` macro, struct, struct field and typedef that
/// the headers under Sources/CForsetti/include declare, and no `FORSETTI_` name that they do not,
/// so the ABI reference cannot drift from the headers.
@Suite struct ABIReferenceTests {
  @Test func everyHeaderNameIsDocumented() throws {
    let root = ABIText.packageRoot()
    let names = try ABIHeaderNames(root: root)
    #expect(!names.constants.isEmpty, "no FORSETTI_ macros found in the headers")
    #expect(!names.structs.isEmpty, "no structs found in the headers")
    #expect(!names.fields.isEmpty, "no struct fields found in the headers")
    #expect(!names.typedefs.isEmpty, "no typedefs found in the headers")
    var documented: Set<String> = []
    for span in try ABIText.codeSpans(root: root) {
      let words = try ABIText.matches(#"[A-Za-z_][A-Za-z0-9_]*"#, in: span)
      documented.formUnion(words.map { $0[0] })
    }
    let kinds = [
      ("constants", names.constants), ("structs", names.structs), ("fields", names.fields),
      ("typedefs", names.typedefs),
    ]
    for (kind, expected) in kinds {
      let missing = expected.subtracting(documented).sorted()
      #expect(missing.isEmpty, "docs/abi.md does not name these \(kind) in backticks: \(missing)")
    }
  }

  /// A `FORSETTI_` name in backticks must be defined by a header; `FORSETTI_ERR_*` must prefix one.
  @Test func everyDocumentedConstantIsDefined() throws {
    let root = ABIText.packageRoot()
    let constants = try ABIHeaderNames(root: root).constants
    var unknown: Set<String> = []
    for span in try ABIText.codeSpans(root: root) {
      for match in try ABIText.matches(#"\bFORSETTI_[A-Z0-9_]*\*?"#, in: span) {
        let token = match[0]
        let known: Bool
        if token.hasSuffix("*") {
          known = constants.contains(where: { $0.hasPrefix(token.dropLast()) })
        } else {
          known = constants.contains(token)
        }
        if !known { unknown.insert(token) }
      }
    }
    #expect(unknown.isEmpty, "docs/abi.md names constants no header defines: \(unknown.sorted())")
  }
}

/// Names declared by the headers, found with regular expressions over the text without comments.
private struct ABIHeaderNames {
  var constants: Set<String> = []
  var structs: Set<String> = []
  var fields: Set<String> = []
  var typedefs: Set<String> = []

  init(root: URL) throws {
    let directory = root.appendingPathComponent("Sources/CForsetti/include")
    let files = try #require(FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil))
    var headers: [URL] = []
    for case let url as URL in files where url.pathExtension == "h" { headers.append(url) }
    try #require(!headers.isEmpty, "no headers under \(directory.path)")
    for header in headers {
      var text = try String(contentsOf: header, encoding: .utf8)
      text = try ABIText.replacing(#"/\*[\s\S]*?\*/"#, in: text)
      text = try ABIText.replacing(#"//[^\n]*"#, in: text)
      let defines = try ABIText.matches(
        #"^[ \t]*#[ \t]*define[ \t]+(FORSETTI_[A-Z0-9_]+)"#, in: text, options: .anchorsMatchLines)
      constants.formUnion(defines.map { $0[1] })
      // `typedef struct NAME { … } NAME;` and `struct NAME { … };` alike; the bodies hold no braces.
      for match in try ABIText.matches(#"\bstruct\s+([A-Za-z_]\w*)\s*\{([^{}]*)\}"#, in: text) {
        structs.insert(match[1])
        for declaration in match[2].split(separator: ";") {
          if let name = try Self.fieldName(String(declaration)) { fields.insert(name) }
        }
      }
      let typedefPatterns = [
        #"\btypedef\b[^;]*?\(\s*\*\s*([A-Za-z_]\w*)\s*\)\s*\("#,  // function pointer types
        #"\btypedef\s+[^;{}()]*?\b([A-Za-z_]\w*)\s*;"#,  // typedef int32_t forsetti_status;
        #"\}\s*([A-Za-z_]\w*)\s*;"#,  // } forsetti_host;
      ]
      for pattern in typedefPatterns {
        let found = try ABIText.matches(pattern, in: text)
        typedefs.formUnion(found.map { $0[1] })
      }
    }
  }

  /// `int32_t (*publish)(…)` → `publish`; `const char *const *ids` → `ids`; `char name[8]` → `name`.
  static func fieldName(_ declaration: String) throws -> String? {
    let text = declaration.trimmingCharacters(in: .whitespacesAndNewlines)
    if text.isEmpty { return nil }
    if let pointer = try ABIText.matches(#"\(\s*\*\s*([A-Za-z_]\w*)\s*\)"#, in: text).first {
      return pointer[1]
    }
    return try ABIText.matches(#"([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*$"#, in: text).first?[1]
  }
}

private enum ABIText {
  static func packageRoot() -> URL {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return url
  }

  /// The contents of docs/abi.md's fenced code blocks and inline code spans.
  static func codeSpans(root: URL) throws -> [String] {
    let text = try String(contentsOf: root.appendingPathComponent("docs/abi.md"), encoding: .utf8)
    let fence = #"^```[^\n]*\n([\s\S]*?)^```[ \t]*$"#
    let blocks = try matches(fence, in: text, options: .anchorsMatchLines).map { $0[1] }
    let prose = try replacing(fence, in: text, options: .anchorsMatchLines)
    let inline = try matches(#"`([^`\n]+)`"#, in: prose).map { $0[1] }
    return blocks + inline
  }

  /// Each match as [whole match, group 1, group 2, …]; a group that did not take part is "".
  static func matches(
    _ pattern: String, in text: String, options: NSRegularExpression.Options = []
  ) throws -> [[String]] {
    let regex = try NSRegularExpression(pattern: pattern, options: options)
    let all = NSRange(text.startIndex..., in: text)
    return regex.matches(in: text, range: all).map { match in
      (0..<match.numberOfRanges).map { index in
        Range(match.range(at: index), in: text).map { String(text[$0]) } ?? ""
      }
    }
  }

  /// `text` with every match of `pattern` replaced by one space.
  static func replacing(
    _ pattern: String, in text: String, options: NSRegularExpression.Options = []
  ) throws -> String {
    let regex = try NSRegularExpression(pattern: pattern, options: options)
    let all = NSRange(text.startIndex..., in: text)
    return regex.stringByReplacingMatches(in: text, range: all, withTemplate: " ")
  }
}
