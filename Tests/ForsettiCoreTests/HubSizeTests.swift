import Foundation
import Testing

/// No hubs in the runtime: no file of `Sources/ForsettiRuntime` over 500 lines, and no type it
/// declares extended from more than two files (its own and one more), so that the next hub fails
/// a test rather than a review. A hub that predated the rule would be listed with the size it had
/// then: each may shrink, none may grow, and a new one is refused. None is listed now:
/// `WorkerProcess` was split into the parts it holds (`ChildProcess`, `WorkerCgroupHold`,
/// `ServeRingCaller`, `CrashReporter`, `WorkerSession`), `WorkerCgroups` lost `CgroupTree`, and
/// `ModuleManager`'s supervision, reload, reconciling and isolated activation became types given
/// the module table (`Supervision`, `Reload`, `Reconciler`, `IsolatedActivation`, …).
@Suite struct HubSizeTests {
  static let longestFile = 500
  static let mostFilesPerType = 2

  /// Files over the limit today, and their length now.
  static let longFiles: [String: Int] = [:]
  /// Types extended from more files than the limit today, and how many.
  static let spreadTypes: [String: Int] = [:]

  static var runtime: URL {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return url.appendingPathComponent("Sources/ForsettiRuntime")
  }

  /// Every Swift file of the runtime, by its path under `Sources/ForsettiRuntime`, with its lines.
  static func files() throws -> [(path: String, lines: [Substring])] {
    let root = runtime.path
    let paths = try #require(FileManager.default.subpaths(atPath: root)).filter { $0.hasSuffix(".swift") }
    return try paths.sorted().map { path in
      let text = try String(contentsOfFile: root + "/" + path, encoding: .utf8)
      // As `wc -l` counts them: the text after the last line break is no line of its own.
      var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
      if text.hasSuffix("\n") { lines.removeLast() }
      return (path, lines)
    }
  }

  /// The name a top-level line declares (`final class X`, `package struct X<…>: …`) or extends
  /// (`extension X`), if it does.
  static func name(after keywords: [String], in line: Substring) -> String? {
    var words = line.split(separator: " ").map(String.init)
    while let first = words.first, ["package", "public", "private", "fileprivate", "final"].contains(first) {
      words.removeFirst()
    }
    guard words.count >= 2, keywords.contains(words[0]) else { return nil }
    return String(words[1].prefix { $0.isLetter || $0.isNumber || $0 == "_" })
  }

  @Test func noRuntimeFileIsOverFiveHundredLines() throws {
    let files = try Self.files()
    #expect(files.count > 100, "read \(files.count) files of the runtime")
    var over: [String] = []
    for f in files {
      let allowed = Self.longFiles[f.path] ?? Self.longestFile
      if f.lines.count > allowed { over.append("\(f.path): \(f.lines.count) lines (at most \(allowed))") }
    }
    #expect(over.isEmpty, "split these by concern:\n\(over.joined(separator: "\n"))")
    // The listed ones are still over: a file split below the limit leaves the list.
    for (path, _) in Self.longFiles {
      let lines = files.first { $0.path == path }?.lines.count ?? 0
      #expect(lines > Self.longestFile, "\(path) is \(lines) lines now: take it off HubSizeTests.longFiles")
    }
  }

  /// Each type `files` declare at the top level, with the file that declares it, and the files
  /// that extend it.
  static func types(in files: [(path: String, lines: [Substring])]) -> (
    declared: [String: String], extended: [String: Set<String>]
  ) {
    var declared: [String: String] = [:]
    var extended: [String: Set<String>] = [:]
    for f in files {
      for line in f.lines where !line.hasPrefix(" ") {
        if let t = name(after: ["class", "struct", "enum", "actor", "protocol"], in: line) {
          declared[t] = f.path
        }
        if let t = name(after: ["extension"], in: line) { extended[t, default: []].insert(f.path) }
      }
    }
    return (declared, extended)
  }

  /// The types of `files` found in more files than they may be (`spreadTypes`, else
  /// `mostFilesPerType`), each with the files that extend it.
  static func spread(in files: [(path: String, lines: [Substring])]) -> [String] {
    let (declared, extended) = types(in: files)
    var spread: [String] = []
    for (type, home) in declared {
      let count = extended[type, default: []].union([home]).count
      let allowed = spreadTypes[type] ?? mostFilesPerType
      if count > allowed {
        spread.append(
          "\(type): \(count) files (\(extended[type, default: []].sorted().joined(separator: ", ")))")
      }
    }
    return spread.sorted()
  }

  @Test func noRuntimeTypeIsExtendedFromMoreThanTwoFiles() throws {
    let files = try Self.files()
    let (declared, extended) = Self.types(in: files)
    // The positive control: the reader finds the runtime's types and their extensions.
    #expect(declared["ModuleManager"] == "Lifecycle/ModuleManager.swift", "\(declared.count) types read")
    #expect(
      extended["WorkerProcess"] == ["Isolation/WorkerProtocol.swift"], "\(extended.count) types extended")
    let spread = Self.spread(in: files)
    #expect(spread.isEmpty, "give these parts types of their own:\n\(spread.joined(separator: "\n"))")
    // A listed hub is listed at its size now: one that shrank lowers its entry, so it cannot grow back.
    for (type, allowed) in Self.spreadTypes {
      let count = extended[type, default: []].union(declared[type].map { [$0] } ?? []).count
      #expect(count == allowed, "\(type) is in \(count) files now: set HubSizeTests.spreadTypes to that")
    }
  }

  /// The rule on files made up for it: a type in three files is refused, one in two is not, and
  /// an extension of a type declared elsewhere (outside the runtime) counts for nothing.
  @Test func aTypeInThreeFilesIsRefused() {
    let files: [(path: String, lines: [Substring])] = [
      ("Hub.swift", ["package final class Hub {", "  extension Nested {", "}"]),
      ("HubParts.swift", ["extension Hub {", "}", "struct Part: Sendable {", "}"]),
      ("HubMore.swift", ["extension Hub: CustomStringConvertible {", "}", "extension Part {", "}"]),
      ("Elsewhere.swift", ["extension String {", "}"]),
    ]
    #expect(Self.spread(in: files) == ["Hub: 3 files (HubMore.swift, HubParts.swift)"])
  }
}
