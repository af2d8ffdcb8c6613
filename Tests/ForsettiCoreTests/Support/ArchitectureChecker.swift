import Foundation

// The architecture test's reading of the package: Package.swift's targets, each Swift file's
// imports, and the checker that holds both against a `Layering` (ArchitectureTests.swift).

// MARK: - Package.swift, read by hand

/// One target declaration of `Package.swift`.
struct PackageTarget: Sendable, Hashable {
  enum Kind: String, Sendable, CaseIterable {
    case target, executableTarget, testTarget, systemLibrary, binaryTarget, plugin, macro
  }

  /// A dependency as declared: a target of this package by name, or another package's product.
  struct Dependency: Sendable, Hashable, CustomStringConvertible {
    var name: String
    var package: String?
    var description: String { package.map { "\(name) (a product of package \($0))" } ?? name }
  }

  var name: String
  var kind: Kind
  var dependencies: [Dependency]
  var path: String?
  /// Where the declaration starts in Package.swift.
  var line: Int

  /// The directory SwiftPM takes its sources from, relative to the package root.
  var sourceDirectory: String { path ?? (kind == .testTarget ? "Tests/\(name)" : "Sources/\(name)") }
}

/// A part of Package.swift the reader cannot take apart: the test stops rather than skip it.
struct PackageManifestError: Error, CustomStringConvertible {
  var line: Int
  var problem: String

  var description: String {
    "Package.swift:\(line): \(problem). The architecture test reads targets written as "
      + "`.target(name: \"X\", dependencies: [\"Y\", …], path: \"…\")`; keep that form or teach "
      + "PackageManifestReader (Tests/ForsettiCoreTests/ArchitectureTests.swift) the new one."
  }
}

/// Reads the targets of a Package.swift written in the plain form this package uses: the
/// `targets:` argument of `Package(…)` is a literal array of `.kind(name: "…", …)` calls whose
/// names, dependencies and paths are literals.
enum PackageManifestReader {
  static func targets(in text: String) throws(PackageManifestError) -> [PackageTarget] {
    let b = Array(SwiftText.blanked(text, strings: false).utf8)
    let lines = LineTable(b)
    guard let call = find(Array("Package(".utf8), in: b), let close = matching(b, call + 7) else {
      throw PackageManifestError(line: 1, problem: "no `Package(…)` call with balanced parentheses")
    }
    let arguments = split(b, call + 8..<close)
    guard let targetsArgument = arguments.first(where: { labelled(b, $0).label == "targets" }) else {
      throw PackageManifestError(
        line: lines.line(of: call), problem: "`Package(…)` has no `targets:` argument")
    }
    let list = labelled(b, targetsArgument).value
    guard let items = arrayItems(b, list) else {
      throw PackageManifestError(
        line: lines.line(of: list.lowerBound), problem: "`targets:` is not a literal array")
    }
    var out: [PackageTarget] = []
    for item in items {
      out.append(try target(b, item, lines))
    }
    return out
  }

  private static func target(_ b: [UInt8], _ item: Range<Int>, _ lines: LineTable)
    throws(PackageManifestError) -> PackageTarget
  {
    let line = lines.line(of: item.lowerBound)
    let text = string(b, item)
    guard let (callee, arguments) = call(b, item) else {
      throw PackageManifestError(line: line, problem: "`\(text.prefix(60))` is not a `.target(…)`-style call")
    }
    guard let kind = PackageTarget.Kind(rawValue: callee) else {
      let known = PackageTarget.Kind.allCases.map { ".\($0.rawValue)" }.joined(separator: ", ")
      throw PackageManifestError(line: line, problem: "`.\(callee)(…)` is none of \(known)")
    }
    var name: String?
    var path: String?
    var dependencies: [PackageTarget.Dependency] = []
    for argument in split(b, arguments) {
      let (label, value) = labelled(b, argument)
      switch label {
      case "name":
        guard let n = literal(b, value) else {
          throw PackageManifestError(
            line: line, problem: "the name `\(string(b, value))` is not a string literal")
        }
        name = n
      case "path":
        guard let p = literal(b, value) else {
          throw PackageManifestError(
            line: line, problem: "the path `\(string(b, value))` is not a string literal")
        }
        path = p
      case "dependencies":
        guard let items = arrayItems(b, value) else {
          throw PackageManifestError(
            line: line, problem: "the dependencies of this target are not a literal array")
        }
        for dep in items {
          guard let d = dependency(b, dep) else {
            throw PackageManifestError(
              line: lines.line(of: dep.lowerBound),
              problem: "the dependency `\(string(b, dep))` is neither \"Name\", .target(name:), "
                + ".byName(name:) nor .product(name:package:) with literal names")
          }
          dependencies.append(d)
        }
      default:
        continue
      }
    }
    guard let name else {
      throw PackageManifestError(line: line, problem: "`.\(callee)(…)` has no `name:`")
    }
    return PackageTarget(name: name, kind: kind, dependencies: dependencies, path: path, line: line)
  }

  private static func dependency(_ b: [UInt8], _ r: Range<Int>) -> PackageTarget.Dependency? {
    if let name = literal(b, r) { return .init(name: name, package: nil) }
    guard let (callee, arguments) = call(b, r) else { return nil }
    var fields: [String: String] = [:]
    for argument in split(b, arguments) {
      let (label, value) = labelled(b, argument)
      if let label, let text = literal(b, value) { fields[label] = text }
    }
    guard let name = fields["name"] else { return nil }
    switch callee {
    case "target", "byName": return .init(name: name, package: nil)
    case "product": return fields["package"].map { .init(name: name, package: $0) }
    default: return nil
    }
  }

  // MARK: Bytes

  static func isIdentifier(_ c: UInt8) -> Bool {
    (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x5F
  }

  static func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x0A || c == 0x09 || c == 0x0D }

  /// The first `needle` in `b` not preceded by an identifier character.
  static func find(_ needle: [UInt8], in b: [UInt8]) -> Int? {
    guard b.count >= needle.count else { return nil }
    for i in 0...(b.count - needle.count) where b[i..<i + needle.count].elementsEqual(needle) {
      if i == 0 || !isIdentifier(b[i - 1]) { return i }
    }
    return nil
  }

  /// The end of the string literal that starts at `i` (a plain `"…"`, as Package.swift uses).
  static func skipString(_ b: [UInt8], _ i: Int) -> Int {
    var j = i + 1
    while j < b.count && b[j] != 0x22 && b[j] != 0x0A { j += b[j] == 0x5C ? 2 : 1 }
    return min(j + 1, b.count)
  }

  /// The index of the bracket closing the one at `open`; nil when unbalanced.
  static func matching(_ b: [UInt8], _ open: Int) -> Int? {
    var depth = 0
    var i = open
    while i < b.count {
      switch b[i] {
      case 0x22:
        i = skipString(b, i)
        continue
      case 0x28, 0x5B, 0x7B: depth += 1
      case 0x29, 0x5D, 0x7D:
        depth -= 1
        if depth == 0 { return i }
      default: break
      }
      i += 1
    }
    return nil
  }

  /// `r` without surrounding white space.
  static func trimmed(_ b: [UInt8], _ r: Range<Int>) -> Range<Int> {
    var lo = r.lowerBound
    var hi = r.upperBound
    while lo < hi && isSpace(b[lo]) { lo += 1 }
    while hi > lo && isSpace(b[hi - 1]) { hi -= 1 }
    return lo..<hi
  }

  static func string(_ b: [UInt8], _ r: Range<Int>) -> String {
    String(decoding: b[trimmed(b, r)], as: UTF8.self)
  }

  /// The comma-separated items of `r` at bracket depth 0, trimmed; an empty last item (a
  /// trailing comma) is dropped.
  static func split(_ b: [UInt8], _ r: Range<Int>) -> [Range<Int>] {
    var out: [Range<Int>] = []
    var depth = 0
    var start = r.lowerBound
    var i = r.lowerBound
    while i < r.upperBound {
      switch b[i] {
      case 0x22:
        i = skipString(b, i)
        continue
      case 0x28, 0x5B, 0x7B: depth += 1
      case 0x29, 0x5D, 0x7D: depth -= 1
      case 0x2C where depth == 0:
        out.append(trimmed(b, start..<i))
        start = i + 1
      default: break
      }
      i += 1
    }
    out.append(trimmed(b, start..<r.upperBound))
    return out.filter { !$0.isEmpty }
  }

  /// `label: value` split at its first top-level colon; no label when there is none.
  static func labelled(_ b: [UInt8], _ r: Range<Int>) -> (label: String?, value: Range<Int>) {
    var i = r.lowerBound
    while i < r.upperBound && isIdentifier(b[i]) { i += 1 }
    let label = r.lowerBound..<i
    while i < r.upperBound && isSpace(b[i]) { i += 1 }
    guard !label.isEmpty, i < r.upperBound, b[i] == 0x3A else { return (nil, r) }
    return (String(decoding: b[label], as: UTF8.self), trimmed(b, i + 1..<r.upperBound))
  }

  /// The content of `r` when it is exactly one plain string literal.
  static func literal(_ b: [UInt8], _ r: Range<Int>) -> String? {
    let t = trimmed(b, r)
    guard t.count >= 2, b[t.lowerBound] == 0x22, b[t.upperBound - 1] == 0x22 else { return nil }
    let inner = b[t.lowerBound + 1..<t.upperBound - 1]
    guard !inner.contains(0x22), !inner.contains(0x5C) else { return nil }
    return String(decoding: inner, as: UTF8.self)
  }

  /// The items of `r` when it is exactly one `[…]` literal.
  static func arrayItems(_ b: [UInt8], _ r: Range<Int>) -> [Range<Int>]? {
    let t = trimmed(b, r)
    guard !t.isEmpty, b[t.lowerBound] == 0x5B, matching(b, t.lowerBound) == t.upperBound - 1 else {
      return nil
    }
    return split(b, t.lowerBound + 1..<t.upperBound - 1)
  }

  /// `.name(arguments)` when `r` is exactly one such call.
  static func call(_ b: [UInt8], _ r: Range<Int>) -> (String, Range<Int>)? {
    let t = trimmed(b, r)
    guard !t.isEmpty, b[t.lowerBound] == 0x2E else { return nil }
    var i = t.lowerBound + 1
    while i < t.upperBound && isIdentifier(b[i]) { i += 1 }
    let name = String(decoding: b[t.lowerBound + 1..<i], as: UTF8.self)
    guard !name.isEmpty, i < t.upperBound, b[i] == 0x28, matching(b, i) == t.upperBound - 1 else {
      return nil
    }
    return (name, i + 1..<t.upperBound - 1)
  }
}

/// Line numbers of byte offsets.
struct LineTable {
  private var starts: [Int] = [0]

  init(_ b: [UInt8]) {
    for (i, c) in b.enumerated() where c == 0x0A { starts.append(i + 1) }
  }

  /// The 1-based line of `offset`.
  func line(of offset: Int) -> Int {
    var lo = 0
    var hi = starts.count
    while hi - lo > 1 {
      let mid = (lo + hi) / 2
      if starts[mid] <= offset { lo = mid } else { hi = mid }
    }
    return lo + 1
  }
}

// MARK: - Swift sources, read as the compiler reads their imports

/// Swift source with comments blanked (and string literals too, when asked), line breaks kept:
/// line N of the result is line N of the file, and an `import` inside a comment or a string
/// (a template of a Package.swift, say) is no longer there to be mistaken for one.
enum SwiftText {
  static func blanked(_ text: String, strings: Bool) -> String {
    String(decoding: blankedBytes(text, strings: strings), as: UTF8.self)
  }

  /// `blanked`, as UTF-8.
  static func blankedBytes(_ text: String, strings: Bool) -> [UInt8] {
    var b = Array(text.utf8)
    let n = b.count
    let (slash, star, quote, hash, backslash, newline): (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
      (0x2F, 0x2A, 0x22, 0x23, 0x5C, 0x0A)
    func blank(_ r: Range<Int>) {
      for k in r where b[k] != newline { b[k] = 0x20 }
    }
    func at(_ j: Int, _ first: UInt8, _ second: UInt8) -> Bool {
      j + 1 < n && b[j] == first && b[j + 1] == second
    }
    /// Whether `c` followed by `hashes` `#` starts at `j`; `count` times `c` for `"""`.
    func delimiter(at j: Int, _ c: UInt8, count: Int, hashes: Int) -> Bool {
      guard j + count + hashes <= n else { return false }
      for k in 0..<count where b[j + k] != c { return false }
      for k in 0..<hashes where b[j + count + k] != hash { return false }
      return true
    }
    var i = 0
    while i < n {
      let c = b[i]
      if c != slash && c != quote && c != hash {
        i += 1
        continue
      }
      if at(i, slash, slash) {
        let start = i
        while i < n && b[i] != newline { i += 1 }
        blank(start..<i)
        continue
      }
      if at(i, slash, star) {
        // Block comments nest in Swift.
        let start = i
        var depth = 0
        while i < n {
          if at(i, slash, star) {
            depth += 1
            i += 2
          } else if at(i, star, slash) {
            depth -= 1
            i += 2
            if depth == 0 { break }
          } else {
            i += 1
          }
        }
        blank(start..<i)
        continue
      }
      var hashes = 0
      while i + hashes < n && b[i + hashes] == hash { hashes += 1 }
      guard i + hashes < n, b[i + hashes] == quote else {
        i += max(1, hashes)
        continue
      }
      // A string literal: "…", """…""", or raw #"…"# / #"""…"""# (escapes are then \#…).
      let start = i
      let multiline = delimiter(at: i + hashes, quote, count: 3, hashes: 0)
      let quotes = multiline ? 3 : 1
      var j = i + hashes + quotes
      while j < n {
        if b[j] == backslash && delimiter(at: j + 1, hash, count: hashes, hashes: 0) {
          j += 1 + hashes + 1
        } else if !multiline && b[j] == newline {
          break  // Unterminated (or an interpolation this reader does not follow): ends with its line.
        } else if delimiter(at: j, quote, count: quotes, hashes: hashes) {
          j += quotes + hashes
          break
        } else {
          j += 1
        }
      }
      i = min(j, n)
      if strings { blank(start..<i) }
    }
    return b
  }
}

/// One `import` statement of a Swift file.
struct ImportStatement: Sendable, Hashable {
  /// The imported module (the first component of `import struct A.B`); nil when the statement
  /// could not be read.
  var module: String?
  var line: Int
  /// The statement as written.
  var text: String
}

/// Finds every `import` of a Swift file: with attributes (`@testable`, `@_implementationOnly`,
/// `@_spi(X)`), access levels (`internal import`), declaration kinds (`import struct A.B`),
/// inside `#if canImport(…)` blocks alike, several on one line after `;`.
enum ImportScanner {
  static let accessLevels: Set<String> = ["public", "package", "internal", "fileprivate", "private", "open"]
  static let declarationKinds: Set<String> = [
    "typealias", "struct", "class", "enum", "protocol", "let", "var", "func",
  ]

  static func imports(in source: String) -> [ImportStatement] {
    var out: [ImportStatement] = []
    let b = SwiftText.blankedBytes(source, strings: true)
    var lineStart = 0
    var lineNumber = 1
    // Byte by byte: most lines hold no `import` and are never made into strings.
    while lineStart <= b.count {
      var end = lineStart
      var holds = false
      while end < b.count && b[end] != 0x0A {
        // "import": i m p o r t
        if b[end] == 0x69, end + 6 <= b.count, b[end + 1] == 0x6D, b[end + 2] == 0x70, b[end + 3] == 0x6F,
          b[end + 4] == 0x72, b[end + 5] == 0x74
        {
          holds = true
        }
        end += 1
      }
      if holds {
        let line = String(decoding: b[lineStart..<end], as: UTF8.self)
        for statement in line.split(separator: ";") {
          let text = statement.trimmingCharacters(in: .whitespaces)
          if let found = read(statement) {
            out.append(ImportStatement(module: found, line: lineNumber, text: text))
          } else if isImport(statement) {
            out.append(ImportStatement(module: nil, line: lineNumber, text: text))
          }
        }
      }
      lineStart = end + 1
      lineNumber += 1
    }
    return out
  }

  /// The words of `statement` after its attributes and access level, when the next is `import`.
  private static func afterImport(_ statement: Substring) -> ArraySlice<Substring>? {
    var words = statement.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })[...]
    while let w = words.first, w.hasPrefix("@") {
      words = words.dropFirst()
      // An attribute's arguments may hold spaces: `@_spi(A B)` ends at its `)`.
      if w.contains("("), !w.contains(")") {
        while let next = words.first, !next.contains(")") { words = words.dropFirst() }
        words = words.dropFirst()
      }
    }
    if let w = words.first, accessLevels.contains(String(w)) { words = words.dropFirst() }
    guard words.first == "import" else { return nil }
    return words.dropFirst()
  }

  static func isImport(_ statement: Substring) -> Bool { afterImport(statement) != nil }

  /// The module `statement` imports; nil when it is no import or cannot be read.
  static func read(_ statement: Substring) -> String? {
    guard var words = afterImport(statement) else { return nil }
    if let w = words.first, declarationKinds.contains(String(w)) { words = words.dropFirst() }
    guard words.count == 1, let path = words.first else { return nil }
    let first = path.split(separator: ".", omittingEmptySubsequences: false).first ?? path
    let module =
      first.hasPrefix("`") && first.hasSuffix("`") && first.count > 2 ? first.dropFirst().dropLast() : first
    guard let c = module.utf8.first, !(c >= 0x30 && c <= 0x39),
      module.utf8.allSatisfy(PackageManifestReader.isIdentifier)
    else { return nil }
    return String(module)
  }
}

// MARK: - The checker

/// One break of the layering: where, what, and the rule it breaks.
struct ArchitectureViolation: Sendable, Hashable, CustomStringConvertible {
  /// Relative to the package root.
  var file: String
  var line: Int
  /// `import Foundation`, `dependency "ForsettiRuntime"`, `target X`.
  var what: String
  var rule: String

  var description: String { "\(file):\(line): \(what): \(rule)" }
}

/// What a check found, and how much it read (so that a check reading nothing cannot pass).
struct ArchitectureReport: Sendable {
  var targets: [PackageTarget] = []
  var violations: [ArchitectureViolation] = []
  /// Swift files read, by target.
  var files: [String: Int] = [:]
  var imports = 0
}

/// Checks a package tree against a layering.
struct ArchitectureChecker {
  var root: URL
  var layering: Layering

  func check() throws -> ArchitectureReport {
    let manifest = try String(contentsOf: root.appendingPathComponent("Package.swift"), encoding: .utf8)
    var report = ArchitectureReport()
    report.targets = try PackageManifestReader.targets(in: manifest)
    let byName = Dictionary(report.targets.map { ($0.name, $0) }) { a, _ in a }
    for target in report.targets {
      guard let rule = layering.rule(for: target) else {
        report.violations.append(
          .init(
            file: "Package.swift", line: target.line, what: "target \(target.name)",
            rule:
              "no row of the layering covers it; add one to Layering.forsetti "
              + "(Tests/ForsettiCoreTests/ArchitectureTests.swift) and to the table of docs/architecture.md"
          ))
        continue
      }
      report.violations += dependencyViolations(target, rule, byName)
      report.violations += try importViolations(target, rule, byName, &report)
    }
    report.violations += unclaimedDirectories(report.targets)
    for row in layering.rows {
      if case .target(let name) = row.subject, byName[name] == nil {
        report.violations.append(
          .init(
            file: "Package.swift", line: 1, what: "layering row \(name)",
            rule: "Package.swift declares no such target; remove the row or fix its name"))
      }
    }
    return report
  }

  private func dependencyViolations(_ t: PackageTarget, _ rule: LayerRule, _ byName: [String: PackageTarget])
    -> [ArchitectureViolation]
  {
    var out: [ArchitectureViolation] = []
    for dep in t.dependencies {
      let what = "\(t.name) depends on \(dep)"
      let target = dep.package == nil ? byName[dep.name] : nil
      if !rule.mayDependOn.contains(dep.name) || dep.package != nil {
        out.append(
          .init(file: "Package.swift", line: t.line, what: what, rule: notAllowed(t, dep.name, rule, byName)))
      } else if !rule.foundation, let target, let below = layering.rule(for: target), below.foundation {
        out.append(
          .init(
            file: "Package.swift", line: t.line, what: what,
            rule: "\(t.name) links no Foundation (\(rule.why)), and \(dep.name) may use Foundation"))
      }
    }
    return out
  }

  /// Why `t` may not use `module`, a target of the package.
  private func notAllowed(
    _ t: PackageTarget, _ module: String, _ rule: LayerRule, _ byName: [String: PackageTarget]
  ) -> String {
    let testCode = module == layering.testSupport || byName[module]?.kind == .testTarget
    if testCode && !layering.isTestCode(t) {
      return "product code never uses test code (\(layering.testSupport) or a test target)"
    }
    if t.name == layering.testSupport {
      return "\(t.name) imports nothing of the product, so every test target can use it"
    }
    let allowed = rule.mayDependOn.sorted().joined(separator: ", ")
    return
      "upward or sideways: \(t.name) may depend only on "
      + "[\(allowed.isEmpty ? "nothing of this package" : allowed)] (\(rule.why))"
  }

  private func importViolations(
    _ t: PackageTarget, _ rule: LayerRule, _ byName: [String: PackageTarget],
    _ report: inout ArchitectureReport
  ) throws -> [ArchitectureViolation] {
    var out: [ArchitectureViolation] = []
    let declared = Set(t.dependencies.filter { $0.package == nil }.map(\.name))
    for file in try swiftFiles(t.sourceDirectory) {
      report.files[t.name, default: 0] += 1
      let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
      for statement in ImportScanner.imports(in: text) {
        report.imports += 1
        func flag(_ why: String) {
          out.append(.init(file: file, line: statement.line, what: "`\(statement.text)`", rule: why))
        }
        guard let m = statement.module else {
          flag(
            "not an import this test can read; write `import Module` (attributes and `struct A.B` are fine)")
          continue
        }
        if m == t.name || layering.platformModules.contains(m) { continue }
        if layering.foundationModules.contains(m) {
          if !rule.foundation { flag("\(t.name) may not import \(m): \(rule.why)") }
        } else if layering.testFrameworks.contains(m) {
          if !layering.isTestCode(t) { flag("product code never imports a test framework") }
        } else if byName[m] != nil {
          if !rule.mayDependOn.contains(m) {
            flag(notAllowed(t, m, rule, byName))
          } else if !declared.contains(m) {
            flag(
              "\(m) is not among the dependencies of \(t.name) in Package.swift (it builds only because "
                + "something else built it first); declare it"
            )
          }
        } else {
          let platform = layering.platformModules.sorted().joined(separator: ", ")
          flag(
            "\(m) is neither a target of this package nor a platform module "
              + "(\(platform); Foundation where the layering allows it)"
          )
        }
      }
    }
    return out
  }

  /// The `.swift` files under `directory` (relative to the root), sorted; relative paths.
  func swiftFiles(_ directory: String) throws -> [String] {
    let base = root.appendingPathComponent(directory).path
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: base, isDirectory: &isDirectory), isDirectory.boolValue
    else {
      throw CheckerError.missingDirectory(directory)
    }
    let all = FileManager.default.enumerator(atPath: base)?.compactMap { $0 as? String } ?? []
    return all.filter { $0.hasSuffix(".swift") && !$0.split(separator: "/").contains { $0.hasPrefix(".") } }
      .sorted().map { "\(directory)/\($0)" }
  }

  /// Directories of Swift sources that no target claims: a target the reader missed, or one
  /// SwiftPM would not build.
  private func unclaimedDirectories(_ targets: [PackageTarget]) -> [ArchitectureViolation] {
    let claimed = Set(targets.map(\.sourceDirectory))
    var out: [ArchitectureViolation] = []
    for parent in ["Sources", "Tests", "Plugins"] {
      let entries =
        (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(parent).path)) ?? []
      for entry in entries.sorted() where !entry.hasPrefix(".") {
        let directory = "\(parent)/\(entry)"
        var isDirectory: ObjCBool = false
        guard
          FileManager.default.fileExists(
            atPath: root.appendingPathComponent(directory).path, isDirectory: &isDirectory),
          isDirectory.boolValue, !claimed.contains(directory)
        else { continue }
        // Under Plugins/, C-only examples are built by scripts/build-plugins, not by SwiftPM; under
        // Tests/, a folder without Swift (the browser test's Python) is run by a Swift test.
        if parent != "Sources", ((try? swiftFiles(directory)) ?? []).isEmpty { continue }
        out.append(
          .init(
            file: directory, line: 0, what: "directory \(directory)",
            rule:
              "no target of Package.swift takes its sources from here (or the reader missed its declaration)")
        )
      }
    }
    return out
  }

  enum CheckerError: Error, CustomStringConvertible {
    case missingDirectory(String)
    var description: String {
      switch self {
      case .missingDirectory(let d): "\(d): a target's source directory is missing"
      }
    }
  }
}
