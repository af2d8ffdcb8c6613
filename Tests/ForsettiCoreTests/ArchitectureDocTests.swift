import ForsettiCore
import Foundation
import Testing

/// docs/architecture.md is held to the code: its layering table is the one the architecture
/// test enforces, its gate table lists `GateStep` in order with real reason codes, it names every
/// reason code and every frame kind of the worker protocol (with its number), and every source
/// file it names exists.
@Suite struct ArchitectureDocTests {
  static var root: URL { ArchitectureTests.packageRoot }

  static func doc() throws -> String {
    try String(contentsOf: root.appendingPathComponent("docs/architecture.md"), encoding: .utf8)
  }

  /// The body rows of the table between `<!-- name:begin -->` and `<!-- name:end -->`, as cells.
  static func table(_ name: String, in text: String) -> [[String]] {
    guard let begin = text.range(of: "<!-- \(name):begin -->"),
      let end = text.range(of: "<!-- \(name):end -->", range: begin.upperBound..<text.endIndex)
    else { return [] }
    let rows = text[begin.upperBound..<end.lowerBound].split(separator: "\n").filter { $0.hasPrefix("|") }
    // The header and the separator line are not rows.
    return rows.dropFirst(2).map(cells)
  }

  /// The cells of a table row; `\|` is a pipe inside a cell.
  static func cells(_ row: Substring) -> [String] {
    let marker = "\u{1}"
    let parts = row.replacingOccurrences(of: "\\|", with: marker).split(
      separator: "|", omittingEmptySubsequences: false)
    return parts.dropFirst().dropLast().map {
      $0.replacingOccurrences(of: marker, with: "|").trimmingCharacters(in: .whitespaces)
    }
  }

  /// Every `code span` of `text`, in order.
  static func backticked(_ text: String) -> [String] {
    text.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }
      .map { String($0.element) }
  }

  /// `text` without its fenced code blocks (whose fences would pair backticks wrongly).
  static func withoutCodeBlocks(_ text: String) -> String {
    var inside = false
    return text.split(separator: "\n", omittingEmptySubsequences: false).filter { line in
      if line.hasPrefix("```") {
        inside.toggle()
        return false
      }
      return !inside
    }.joined(separator: "\n")
  }

  @Test func theLayeringTableIsTheEnforcedOne() throws {
    func line(_ subject: String, _ deps: [String], _ foundation: Bool) -> String {
      "| \(subject) | \(deps.isEmpty ? "—" : deps.map { "`\($0)`" }.joined(separator: ", ")) | \(foundation ? "yes" : "no") |"
    }
    let expected = Layering.forsetti.rows.map {
      line($0.subject.description, $0.rule.mayDependOn.sorted(), $0.rule.foundation)
    }
    let rows = Self.table("layering", in: try Self.doc())
    #expect(rows.count == expected.count, "rows: \(rows.count)")
    let documented = rows.map { cells -> String in
      guard cells.count >= 3 else { return "| \(cells) |" }
      let deps = cells[1] == "—" ? [] : Self.backticked(cells[1]).sorted()
      return line(cells[0], deps, cells[2] == "yes")
    }
    // Printed in the test's order, ready to compare with (or paste into) the doc's first columns.
    #expect(
      documented == expected, "\ndocs/architecture.md should read:\n\(expected.joined(separator: "\n"))")
    for cells in rows where cells.count >= 3 {
      #expect(["yes", "no"].contains(cells[2]), "Foundation is yes or no: \(cells)")
    }
  }

  @Test func theGateTableListsEveryStepInOrder() throws {
    let rows = Self.table("gates", in: try Self.doc())
    let steps = rows.map { $0.count > 1 ? Self.backticked($0[1]).first ?? $0[1] : "" }
    #expect(steps == GateStep.allCases.map(\.rawValue))
    #expect(rows.map { $0.first ?? "" } == GateStep.allCases.indices.map { "\($0 + 1)" })
    for cells in rows {
      let codes = cells.count > 4 ? Self.backticked(cells[4]) : []
      #expect(!codes.isEmpty, "no reason code for \(cells.first ?? "?")")
      for code in codes { #expect(ReasonCode(rawValue: code) != nil, "`\(code)` is not a ReasonCode") }
    }
  }

  @Test func everyReasonCodeIsNamed() throws {
    let text = try Self.doc()
    let missing = ReasonCode.allCases.map(\.rawValue).filter { !text.contains("`\($0)`") }
    #expect(missing.isEmpty, "docs/architecture.md does not name: \(missing)")
  }

  /// `(name, number)` of every `case name = number` of `WireKind`, read from Wire.swift's text
  /// (ForsettiBridge is not a dependency of this test target).
  static func wireKinds() throws -> [(String, String)] {
    let text = try String(
      contentsOf: root.appendingPathComponent("Sources/ForsettiBridge/Worker/Wire.swift"), encoding: .utf8)
    guard let start = text.range(of: "enum WireKind"),
      let end = text.range(of: "\n}", range: start.upperBound..<text.endIndex)
    else { return [] }
    return text[start.upperBound..<end.lowerBound].split(separator: "\n").compactMap { line in
      let words = line.split(separator: " ")
      guard words.count == 4, words[0] == "case", words[2] == "=" else { return nil }
      return (String(words[1]), String(words[3]))
    }
  }

  @Test func everyFrameKindIsNamedWithItsNumber() throws {
    let kinds = try Self.wireKinds()
    #expect(kinds.count >= 20, "read \(kinds.count) kinds from Wire.swift")
    #expect(kinds.contains { $0.0 == "configure" } && kinds.contains { $0.0 == "stateSaved" })
    let lines = try Self.doc().split(separator: "\n")
    for (name, number) in kinds {
      #expect(
        lines.contains { $0.hasPrefix("| `\(name)` | \(number) |") },
        "docs/architecture.md has no frame table row \"| `\(name)` | \(number) | …\"")
    }
  }

  @Test func everyFileNamedExists() throws {
    let fm = FileManager.default
    var names = Set<String>()
    for top in ["Sources", "Tests", "Plugins", "docs"] {
      let base = Self.root.appendingPathComponent(top).path
      for case let path as String in fm.enumerator(atPath: base)?.allObjects ?? [] {
        names.insert((path as NSString).lastPathComponent)
      }
    }
    #expect(names.contains("GateTrace.swift"), "the file walk found nothing")
    var missing: [String] = []
    for token in Set(Self.backticked(Self.withoutCodeBlocks(try Self.doc())))
    where !token.contains(" ") && !token.contains("*") {
      let isPath = ["Sources/", "Tests/", "Plugins/", "scripts/", "docs/", "manifests/"].contains {
        token.hasPrefix($0)
      }
      let isFile = [".swift", ".h", ".c"].contains { token.hasSuffix($0) }
      if isPath {
        if !fm.fileExists(atPath: Self.root.appendingPathComponent(token).path) { missing.append(token) }
      } else if isFile && !names.contains(token)
        && !fm.fileExists(atPath: Self.root.appendingPathComponent(token).path)
      {
        missing.append(token)
      }
    }
    #expect(missing.isEmpty, "docs/architecture.md names files that do not exist: \(missing.sorted())")
  }
}
