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

  /// Builds the package in its own `.build` (nothing of the tests' build is reused) and runs it on
  /// the shared database example in workers, for one second.
  @Test func theDocumentsPackageBuildsRunsTheModulesAndCallsTheirRole() throws {
    try #require(try Self.documentedFiles().count == 2)
    let build = try ProcessRunner.run("/usr/bin/env", ["swift", "build", "--package-path", Self.package])
    try #require(build.status == 0, "swift build failed:\n\(build.stdout)\(build.stderr)")
    try ExampleModules.installSharedDatabase(in: dir)
    // AskTheApp, made a paid module here: it starts only if the application's own entitlement
    // source unlocks its product, and then calls the application's service from its worker.
    try ExampleModules.installAskTheApp(in: dir, product: "com.example.weather-plus")
    let worker = (HostBinary.path as NSString).deletingLastPathComponent + "/forsetti-worker"
    let run = try ProcessRunner.run(
      Self.package + "/.build/debug/embed-example",
      [
        "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state", dir.url("state"),
        "--worker", worker, "--for", "1",
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
    #expect(lines.contains("weather: com.example.asktheapp asks about Oslo"), "\(run.stdout)")
    #expect(run.stderr.contains("the application says: sunny in Oslo"), "\(run.stderr)")
    #expect(lines.contains("shared_database: put 0, get 0: hello from Swift"), "\(run.stdout)")
    #expect(lines.last == "stopped: deadline", "\(run.stdout)")
    #expect(
      !FileManager.default.fileExists(atPath: dir.url("state/control.sock")), "the socket outlived the host")
  }
}
