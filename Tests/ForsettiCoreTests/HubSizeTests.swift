import Foundation
import Testing

/// No hubs in the runtime: no file of `Sources/ForsettiRuntime` over 500 lines, and no type it
/// declares extended from more than two files (its own and one more), so that the next hub fails
/// a test rather than a review. The hubs that predate the rule are listed with the size they have
/// now: each may shrink, none may grow, and a new one is refused. (`WorkerProcess` was split into
/// the parts it holds — `ChildProcess`, `WorkerCgroupHold`, `ServeRingCaller`, `CrashReporter`,
/// `WorkerSession` — and `WorkerCgroups` lost `CgroupTree`; `ModuleManager`'s supervision,
/// reload, reconciling and isolated activation are still extensions of it, to become types
/// given the module table.)
@Suite struct HubSizeTests {
  static let longestFile = 500
  static let mostFilesPerType = 2

  /// Files over the limit today, and their length now.
  static let longFiles: [String: Int] = [:]
  /// Types extended from more files than the limit today, and how many.
  static let spreadTypes: [String: Int] = ["ModuleManager": 5]

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

  @Test func noRuntimeTypeIsExtendedFromMoreThanTwoFiles() throws {
    let files = try Self.files()
    var declared: [String: String] = [:]
    var extended: [String: Set<String>] = [:]
    for f in files {
      for line in f.lines where !line.hasPrefix(" ") {
        if let t = Self.name(after: ["class", "struct", "enum", "actor", "protocol"], in: line) {
          declared[t] = f.path
        }
        if let t = Self.name(after: ["extension"], in: line) { extended[t, default: []].insert(f.path) }
      }
    }
    // The positive control: the reader finds the runtime's types and their extensions.
    #expect(declared["ModuleManager"] == "Lifecycle/ModuleManager.swift", "\(declared.count) types read")
    #expect((extended["ModuleManager"]?.count ?? 0) >= 1)
    var spread: [String] = []
    for (type, home) in declared {
      let count = extended[type, default: []].union([home]).count
      let allowed = Self.spreadTypes[type] ?? Self.mostFilesPerType
      if count > allowed {
        spread.append(
          "\(type): \(count) files (\(extended[type, default: []].sorted().joined(separator: ", ")))")
      }
    }
    #expect(spread.isEmpty, "give these parts types of their own:\n\(spread.joined(separator: "\n"))")
    // A listed hub is listed at its size now: one that shrank lowers its entry, so it cannot grow back.
    for (type, allowed) in Self.spreadTypes {
      let count = extended[type, default: []].union(declared[type].map { [$0] } ?? []).count
      #expect(count == allowed, "\(type) is in \(count) files now: set HubSizeTests.spreadTypes to that")
    }
  }
}
