import ForsettiTestSupport
import Foundation
import Testing

/// The Swift section of docs/embedding.md, built and run as an application's developer would:
/// `Examples/embed-swift` must be exactly the document's blocks, so the page cannot drift from
/// what builds and runs.
@Suite(.onTestThreads) struct EmbedSwiftPackageTests {
  let dir = TemporaryDirectory("embed-swift")
  static let package = ExampleModules.root("Examples/embed-swift")

  /// The document's blocks marked `<!-- embed: swift/PATH -->`, by PATH.
  static func documentedFiles() throws -> [String: String] {
    let doc = try String(contentsOfFile: ExampleModules.root("docs/embedding.md"), encoding: .utf8)
    var files: [String: String] = [:]
    let marker = "<!-- embed: swift/"
    var rest = doc[...]
    while let m = rest.range(of: marker) {
      let tail = rest[m.upperBound...]
      guard let close = tail.range(of: " -->\n"),
        let open = tail[close.upperBound...].range(of: "```swift\n"),
        let end = tail[open.upperBound...].range(of: "\n```\n")
      else { break }
      files[String(tail[..<close.lowerBound])] = String(tail[open.upperBound..<end.lowerBound]) + "\n"
      rest = tail[end.upperBound...]
    }
    return files
  }

  @Test func theExamplePackageIsTheDocumentsBlocks() throws {
    let files = try Self.documentedFiles()
    #expect(files.keys.sorted() == ["Package.swift", "Sources/embed-example/main.swift"])
    for (path, text) in files {
      let onDisk = try String(contentsOfFile: Self.package + "/" + path, encoding: .utf8)
      #expect(
        onDisk == text,
        "Examples/embed-swift/\(path) differs from its block in docs/embedding.md; the document is the source"
      )
    }
  }

  /// The files of the checkout as a fresh clone has them (tracked, and new ones not ignored:
  /// no `.build`), copied into `destination`.
  static func copyCheckout(to destination: String) throws {
    let listed = try ProcessRunner.run(
      "/usr/bin/git",
      ["-C", HostBinary.packageRoot, "ls-files", "-z", "--cached", "--others", "--exclude-standard"])
    try #require(listed.status == 0, "git ls-files: \(listed.stderr)")
    let fm = FileManager.default
    for path in listed.stdout.split(separator: "\0").map(String.init) {
      let from = HostBinary.packageRoot + "/" + path
      guard fm.fileExists(atPath: from) else { continue }  // deleted, not yet committed
      let to = destination + "/" + path
      try fm.createDirectory(
        atPath: (to as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
      try fm.copyItem(atPath: from, toPath: to)
    }
  }

  /// The walk of the document, as written, in a copy of the checkout as a fresh clone has it
  /// (SwiftPM's lock on this package's `.build`, which the running tests hold, would stop the
  /// walk's `swift build` here): the example modules, the worker, the application, a run of
  /// five seconds on `manifests/` in workers. Then the application built by the walk runs the
  /// shared database example with AskTheApp made a paid module, which starts only because the
  /// application's entitlement source unlocks it and then calls the application's service.
  @Test func theDocumentsWalkPassesAsWrittenOnAFreshCheckout() throws {
    try #require(try Self.documentedFiles().count == 2)
    let doc = try String(contentsOfFile: ExampleModules.root("docs/embedding.md"), encoding: .utf8)
    let marker = try #require(doc.range(of: "<!-- walk: swift -->\n```sh\n"), "the walk's block is gone")
    let end = try #require(doc[marker.upperBound...].range(of: "\n```\n"))
    let commands = doc[marker.upperBound..<end.lowerBound].split(separator: "\n").map(String.init)
    let example = "Examples/embed-swift/.build/debug/embed-example"
    #expect(commands.count == 4 && commands.last?.hasPrefix(example) == true, "\(commands)")
    let checkout = dir.url("checkout")
    try Self.copyCheckout(to: checkout)
    var ran: ProcessResult?
    for command in commands {
      let r = try ProcessRunner.run("/bin/bash", ["-c", command], in: checkout)
      try #require(r.status == 0, "`\(command)` failed:\n\(r.stdout)\(r.stderr)")
      ran = r
    }
    let walk = try #require(ran)
    let walked = walk.stdout.split(separator: "\n").map(String.init)
    for id in [
      "com.example.shared-database", "com.example.notes", "com.example.asktheapp", "com.example.helloc",
    ] {
      #expect(walked.contains("module \(id): started"), "\(walk.stdout)")
    }
    #expect(walked.contains("weather: com.example.asktheapp asks about Oslo"), "\(walk.stdout)")
    #expect(walked.contains("shared_database: put 0, get 0: hello from Swift"), "\(walk.stdout)")
    #expect(walked.last == "stopped: deadline", "\(walk.stdout)")

    try ExampleModules.installSharedDatabase(in: dir)
    try ExampleModules.installAskTheApp(in: dir, product: "com.example.weather-plus")
    let run = try ProcessRunner.run(
      checkout + "/" + example,
      [
        "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state", dir.url("state"),
        "--worker", checkout + "/.build/debug/forsetti-worker", "--for", "1",
      ])
    let lines = run.stdout.split(separator: "\n").map(String.init)
    #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
    for id in [
      "com.example.shared-database", "com.example.notes", "com.example.journal", "com.example.asktheapp",
    ] {
      #expect(lines.contains("module \(id): started"), "\(run.stdout)")
    }
    #expect(
      lines.contains("entitlement: com.example.asktheapp asks for com.example.weather-plus: unlocked"),
      "\(run.stdout)")
    #expect(run.stderr.contains("the application says: sunny in Oslo"), "\(run.stderr)")
    #expect(lines.last == "stopped: deadline", "\(run.stdout)")
    #expect(
      !FileManager.default.fileExists(atPath: dir.url("state/control.sock")), "the socket outlived the host")
  }
}
