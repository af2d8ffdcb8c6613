import ForsettiTestSupport
import Foundation
import Testing

/// The debug screen (`run --ui`) driven in headless Chromium by Tests/browser/debug_screen.py:
/// approve, force off, trace, live events, and the token / Host / CSRF / CORS guards.
@Suite(.onTestThreads) struct DebugScreenBrowserTests {
  let dir = TemporaryDirectory("debug-screen")

  static let chromium = "/usr/bin/chromium"
  static let chromedriver = "/usr/bin/chromedriver"
  static let install =
    "install them: apt-get install chromium chromium-driver && pip install selenium (.ci/run does this)"

  /// The bundled examples in `dir/plugins`.
  func installExamples() throws -> String { try ExampleModules.install(in: dir) }

  /// What the browser test needs and this machine lacks; the test fails (never skips) on it.
  static func missingPrerequisites() throws -> [String] {
    var missing: [String] = []
    let fm = FileManager.default
    if !fm.isExecutableFile(atPath: chromium) { missing.append("\(chromium) (Debian package chromium)") }
    if !fm.isExecutableFile(atPath: chromedriver) {
      missing.append("\(chromedriver) (Debian package chromium-driver)")
    }
    let selenium = try ProcessRunner.run("/usr/bin/env", ["python3", "-c", "import selenium"])
    if selenium.status != 0 { missing.append("the Python module selenium (PyPI selenium)") }
    return missing
  }

  /// Where the screenshot goes: `FORSETTI_SCREENSHOT=1` refreshes the README's
  /// (`docs/debug-screen.png`); otherwise a temporary file, so running the tests leaves the tree
  /// as it was.
  static func screenshot(root: NSString, fallback: String) -> String {
    ProcessInfo.processInfo.environment["FORSETTI_SCREENSHOT"] == "1"
      ? root.appendingPathComponent("docs/debug-screen.png") : fallback
  }

  @Test func thePageWorksInARealBrowserAndRefusesWhatItMust() throws {
    let missing = try Self.missingPrerequisites()
    #expect(missing.isEmpty, "the browser test needs \(missing.joined(separator: ", ")); \(Self.install)")
    guard missing.isEmpty else { return }

    let plugins = try installExamples()
    let root = HostBinary.packageRoot as NSString
    let policy = try dir.write("policy.json", #"{"default": "allow", "rules": []}"#)
    let r = try ProcessRunner.run(
      "/usr/bin/env",
      [
        "python3", root.appendingPathComponent("Tests/browser/debug_screen.py"),
        "--host", HostBinary.path,
        "--manifests", root.appendingPathComponent("manifests"),
        "--plugins", plugins,
        "--state", dir.url("state"),
        "--screenshot", Self.screenshot(root: root, fallback: dir.url("debug-screen.png")),
        "--chromium", Self.chromium, "--chromedriver", Self.chromedriver, "--policy", policy,
      ])
    #expect(r.status == 0, "debug_screen.py exited \(r.status):\n\(r.stdout)\n\(r.stderr)")
    if r.status == 0 {
      #expect(r.stdout.contains("PASS: the debug screen works"), "\(r.stdout)")
      // Issue 40 (6): a policy file broken under the running host did not empty the table.
      #expect(r.stdout.contains("the page says: ") && r.stdout.contains("last valid policy"), "\(r.stdout)")
    }
  }

  /// A hostile module's log lines and health on the page: each log call one event line, marked
  /// as the module's, every character of the module-text rule escaped and none raw.
  @Test(arguments: HostileHost.Identity.allCases)
  func aHostileModulesTextIsEscapedAndMarkedAsItsOwn(as identity: HostileHost.Identity) throws {
    let missing = try Self.missingPrerequisites()
    #expect(missing.isEmpty, "the browser test needs \(missing.joined(separator: ", ")); \(Self.install)")
    guard missing.isEmpty else { return }
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    let id = "com.test.hostile"
    try h.install(HostileText.module(id), capabilities: HostileText.capabilities)
    try FileManager.default.createDirectory(atPath: h.dir.url("state"), withIntermediateDirectories: true)
    var runAs: [String] = []
    if identity == .unprivileged {
      let chown = try ProcessRunner.run(
        "/bin/chown", ["-R", "\(HostileHost.nobody):\(HostileHost.nobody)", h.dir.path])
      try #require(chown.status == 0, "\(chown.stderr)")
      runAs = ["--run-as", String(HostileHost.nobody)]
    }
    let root = HostBinary.packageRoot as NSString
    let r = try ProcessRunner.run(
      "/usr/bin/env",
      [
        "python3", root.appendingPathComponent("Tests/browser/debug_screen.py"),
        // As uid 65534, copies in a directory every user may enter: the clone's own build may sit
        // in a directory only root can enter (issue 40).
        "--host", identity == .unprivileged ? HostBinary.forOtherUsers : HostBinary.path,
        "--manifests", h.dir.url("manifests"), "--plugins", h.dir.url("plugins"),
        "--state", h.dir.url("state"), "--chromium", Self.chromium, "--chromedriver", Self.chromedriver,
        "--hostile", id, "--expect", HostileText.escaped,
      ] + runAs)
    #expect(r.status == 0, "debug_screen.py exited \(r.status):\n\(r.stdout)\n\(r.stderr)")
    if r.status == 0 { #expect(r.stdout.contains("PASS: module text is escaped and marked"), "\(r.stdout)") }
  }
}
