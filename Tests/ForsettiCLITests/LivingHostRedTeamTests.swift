import ForsettiTestSupport
import Foundation
import Testing

/// A running `forsetti-host run`, attacked with changes an operator's tooling makes in ways the
/// host's watches may not expect, and with option values it may not survive.
@Suite(.onTestThreads, .serialized) struct LivingHostRedTeamTests: LiveHostSuite {
  let dir = TemporaryDirectory("redteam")

  /// A deployment tool installs the licences as a whole directory renamed into place (over the
  /// empty one the host made). The new licence must unlock the paid module as a single file
  /// moved in does.
  @Test func aLicencesDirectoryReplacedByRenameIsSeen() throws {
    let paid = try module("com.test.paid", product: "com.vendor.pro")
    let keeper = try module("com.test.keeper")
    try cli(["keygen", dir.url("vendor")])
    try FileManager.default.createDirectory(
      atPath: state + "/trusted-keys/licences", withIntermediateDirectories: true)
    try FileManager.default.copyItem(
      atPath: dir.url("vendor.pub"), toPath: state + "/trusted-keys/licences/vendor.pub")
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

    w = published(["com.test.paid": "started", "com.test.keeper": "started"], by: host)
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
