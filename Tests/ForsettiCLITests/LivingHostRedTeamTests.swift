import ForsettiTestSupport
import Foundation
import Testing

/// A running `forsetti-host run`, attacked with changes an operator's tooling makes in ways the
/// host's watches may not expect, and with option values it may not survive.
@Suite(.serialized) struct LivingHostRedTeamTests {
  let dir = TemporaryDirectory("redteam")

  var state: String { dir.url("state") }
  var manifests: String { dir.url("manifests") }

  @discardableResult
  func module(_ id: String, product: String? = nil) throws -> String {
    let entry = (id.split(separator: ".").last.map(String.init) ?? "module") + "_entry"
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.start = "fixture_log(\"hello from \(id)\"); return FORSETTI_OK;"
    f.stop = "fixture_log(\"bye from \(id)\");"
    return try f.install(
      in: dir, name: entry, manifestExtra: product.map { #","iapProductID":"\#($0)""# } ?? "")
  }

  func launch(_ extra: [String] = []) throws -> DevHost {
    try DevHost.launch(
      ["run", "--manifests", manifests, "--plugins", dir.url("plugins"), "--state", state, "--for", "30"]
        + extra)
  }

  @discardableResult
  func cli(_ args: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> ProcessResult {
    let r = try HostBinary.run(args)
    #expect(
      r.status == 0, "forsetti-host \(args.joined(separator: " ")): \(r.stderr)",
      sourceLocation: sourceLocation)
    return r
  }

  func published(_ expected: [String: String], by host: DevHost, timeout: Double = 10) -> RuntimeWait {
    LiveHost.wait(
      stateDirectory: state, pid: host.process.processIdentifier, for: expected, timeout: timeout,
      isRunning: { host.process.isRunning })
  }

  func why(_ wait: RuntimeWait, _ host: DevHost) -> Comment {
    "\(wait)\nhost output (last 30 lines):\n\(host.lines.suffix(30).joined(separator: "\n"))"
  }

  /// A deployment tool installs the licences as a whole directory renamed into place (over the
  /// empty one the host made). The new licence must unlock the paid module as a single file
  /// moved in does.
  @Test func aLicencesDirectoryReplacedByRenameIsSeen() throws {
    let paid = try module("com.test.paid", product: "com.vendor.pro")
    let keeper = try module("com.test.keeper")
    try cli(["keygen", dir.url("vendor")])
    try FileManager.default.createDirectory(
      atPath: state + "/trusted-keys", withIntermediateDirectories: true)
    try FileManager.default.copyItem(
      atPath: dir.url("vendor.pub"), toPath: state + "/trusted-keys/vendor.pub")
    for so in [paid, keeper] { try cli(["sign", so, "--key", dir.url("vendor.key")]) }

    let host = try launch()
    defer { host.stop() }
    var w = published(["com.test.paid": "blocked/moduleLocked", "com.test.keeper": "started"], by: host)
    try #require(w.reached, why(w, host))
    // The host made STATE/licences (empty) to watch it.
    #expect(FileManager.default.fileExists(atPath: state + "/licences"))

    try FileManager.default.createDirectory(atPath: dir.url("staged"), withIntermediateDirectories: true)
    try cli([
      "licence", "--key", dir.url("vendor.key"), "--product", "com.vendor.pro", "--licensee", "Ada",
      "--expires", TrustTests.instant(3600), "--out", dir.url("staged/pro.licence"),
    ])
    #expect(rename(dir.url("staged"), state + "/licences") == 0, "rename: \(errno)")

    w = published(["com.test.paid": "started", "com.test.keeper": "started"], by: host, timeout: 3)
    #expect(w.reached, why(w, host))
  }

  /// `--max-restarts` accepts any non-negative number, then converts it to Int unchecked: a
  /// large value must be refused as a usage error (exit 2), not trap the host.
  @Test func aHugeMaxRestartsIsRefusedNotACrash() throws {
    try module("com.test.keeper")
    for value in ["1e300", "1e19"] {
      let r = try HostBinary.run([
        "run", "--manifests", manifests, "--plugins", dir.url("plugins"), "--state", state, "--for", "0",
        "--max-restarts", value,
      ])
      #expect(
        r.status == 0 || r.status == 2, "--max-restarts \(value): status \(r.status): \(r.stderr.suffix(300))"
      )
    }
  }
}
