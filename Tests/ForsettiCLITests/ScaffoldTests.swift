import ForsettiTestSupport
import Foundation
import Testing

/// From nothing to a running module with the installed files only: `scripts/install`, then
/// `forsetti-host new`, then the project's one build command, then the host runs it.
@Suite(.onTestThreads, .serialized) struct ScaffoldTests {
  let dir = TemporaryDirectory("scaffold")

  /// Installs the host built for these tests into a fresh prefix.
  func install() throws -> String {
    let prefix = dir.url("prefix")
    let binDir = (HostBinary.path as NSString).deletingLastPathComponent
    let r = try ProcessRunner.run(
      "/usr/bin/env",
      ["bash", HostBinary.packageRoot + "/scripts/install", "--prefix", prefix, "--bin-dir", binDir])
    try #require(r.status == 0, "install failed: \(r.stderr)")
    for file in [
      "bin/forsetti-host", "libexec/forsetti/forsetti-worker", "include/forsetti.h",
      "include/forsetti/entry.h",
      "lib/pkgconfig/forsetti.pc", "share/forsetti/ForsettiSDK/Package.swift",
      "share/forsetti/ForsettiSDK/Sources/ForsettiSDK/Export.swift",
    ] {
      #expect(FileManager.default.fileExists(atPath: prefix + "/" + file), "\(file) not installed")
    }
    return prefix
  }

  /// Runs the installed host on the project in `project` and expects `id` to start and stop.
  func expectRuns(_ id: String, prefix: String, project: String, plugins: String) throws {
    let r = try ProcessRunner.run(
      prefix + "/bin/forsetti-host",
      [
        "run", "--manifests", "manifests", "--plugins", plugins, "--state", project + "/.forsetti", "--for",
        "1",
      ],
      in: project)
    let all = r.stdout + r.stderr
    #expect(r.status == 0, "run failed: \(all)")
    #expect(all.contains("hello from \(id)"), "the module's start did not log: \(all)")
    #expect(all.contains("started \(id) 0.1.0"), "\(all)")
    #expect(all.contains("1 ran and stopped cleanly"), "\(all)")
  }

  @Test func aCModuleBuildsWithMakeAgainstTheInstallationAndRuns() throws {
    let prefix = try install()
    let project = dir.url("cthing")
    let made = try ProcessRunner.run(
      prefix + "/bin/forsetti-host", ["new", "--lang", "c", "--id", "com.test.scaffold-c", project])
    try #require(made.status == 0, "new failed: \(made.stderr)")
    let build = try ProcessRunner.run("/usr/bin/env", ["make"], in: project)
    try #require(build.status == 0, "make failed: \(build.stdout)\(build.stderr)")
    // The compiler saw the installed headers, not this checkout's.
    #expect(build.stdout.contains("-I\(prefix)/include"))
    #expect(!build.stdout.contains(HostBinary.packageRoot + "/Sources"))
    let lint = try ProcessRunner.run("/usr/bin/env", ["make", "lint"], in: project)
    #expect(lint.status == 0 && lint.stdout.contains("0 errors, 0 warnings"), "\(lint.stdout)\(lint.stderr)")
    try expectRuns("com.test.scaffold-c", prefix: prefix, project: project, plugins: "build")

    // Under `dev`, the project's next `make` is picked up by the running host.
    let dev = try DevHost(
      ["--manifests", "manifests", "--plugins", "build", "--state", project + "/.forsetti"], verb: "dev",
      executable: prefix + "/bin/forsetti-host",
      in: project)
    defer { dev.stop() }
    let started = try #require(dev.await("started com.test.scaffold-c"), "\(dev.lines)")
    let source = project + "/src/scaffold_c.c"
    let text = try String(contentsOfFile: source, encoding: .utf8)
    try #require(text.contains("\"hello from com.test.scaffold-c\""))
    try text.replacingOccurrences(of: "\"hello from", with: "\"hello again from").write(
      toFile: source, atomically: true, encoding: .utf8)
    let rebuild = try ProcessRunner.run("/usr/bin/env", ["make"], in: project)
    try #require(rebuild.status == 0, "\(rebuild.stderr)")
    #expect(dev.await("hello again from com.test.scaffold-c", from: started.0) != nil, "\(dev.lines)")
    #expect(
      dev.await("reload com.test.scaffold-c 0.1.0 → 0.1.0: reloaded", from: started.0) != nil, "\(dev.lines)")
  }

  @Test func aSwiftModuleBuildsWithSwiftBuildAgainstTheInstalledSDKAndRuns() throws {
    let prefix = try install()
    let project = dir.url("sthing")
    let made = try ProcessRunner.run(
      prefix + "/bin/forsetti-host",
      ["new", "--lang", "swift", "--id", "com.test.scaffold-swift", "--type", "ui", project])
    try #require(made.status == 0, "new failed: \(made.stderr)")
    let package = try String(contentsOfFile: project + "/Package.swift", encoding: .utf8)
    #expect(package.contains("\(prefix)/share/forsetti/ForsettiSDK"))
    #expect(!package.contains(HostBinary.packageRoot))
    let build = try ProcessRunner.run("/usr/bin/env", ["swift", "build"], in: project)
    try #require(build.status == 0, "swift build failed: \(build.stdout)\(build.stderr)")
    let lint = try ProcessRunner.run(
      prefix + "/bin/forsetti-host",
      ["lint", "manifests/scaffold-swift.json", "--plugin", ".build/debug/libScaffoldSwiftModule.so"],
      in: project)
    #expect(lint.status == 0 && lint.stdout.contains("0 errors, 0 warnings"), "\(lint.stdout)\(lint.stderr)")
    try expectRuns("com.test.scaffold-swift", prefix: prefix, project: project, plugins: ".build/debug")
  }

  @Test func newRefusesANonEmptyDirectoryABadIDAndAMissingInstallation() throws {
    let prefix = try install()
    try dir.write("busy/notes.txt", "mine")
    let busy = try ProcessRunner.run(
      prefix + "/bin/forsetti-host", ["new", "--id", "com.test.busy", dir.url("busy")])
    #expect(busy.status == 2 && busy.stderr.contains("is not empty"))
    #expect(try String(contentsOfFile: dir.url("busy/notes.txt"), encoding: .utf8) == "mine")

    let bad = try ProcessRunner.run(
      prefix + "/bin/forsetti-host", ["new", "--id", "Not An ID", dir.url("bad")])
    #expect(bad.status == 2 && bad.stderr.contains("moduleID"), "\(bad.stderr)")
    #expect(!FileManager.default.fileExists(atPath: dir.url("bad")))

    let nowhere = try HostBinary.run([
      "new", "--id", "com.test.lost", "--prefix", dir.url("none"), dir.url("lost"),
    ])
    #expect(nowhere.status == 2 && nowhere.stderr.contains("scripts/install --prefix"), "\(nowhere.stderr)")
  }
}
