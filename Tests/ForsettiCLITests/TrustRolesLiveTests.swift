import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

/// Trust roles in a running `forsetti-host run`: keys installed in or removed from
/// `trusted-keys/licences/` and `trusted-keys/modules/` take effect at once, the host answers
/// `explain` with its own `--require-signatures`, and `override --json` through it stays JSON.
@Suite(.onTestThreads, .serialized) struct TrustRolesLiveTests: LiveHostSuite {
  let dir = TemporaryDirectory("trust-roles-live")

  func licence(_ key: String, product: String) throws {
    try FileManager.default.createDirectory(atPath: state + "/licences", withIntermediateDirectories: true)
    try cli([
      "licence", "--key", key + ".key", "--product", product, "--licensee", "Ada", "--expires",
      TrustTests.instant(3600), "--out", state + "/licences/pro.licence",
    ])
  }

  @Test func aLicenceKeyTrustedOrRemovedWhileRunningTakesEffect() throws {
    try module("com.test.paid", product: "com.vendor.pro")
    try module("com.test.keeper")
    try cli(["keygen", dir.url("vendor")])
    try licence(dir.url("vendor"), product: "com.vendor.pro")

    let host = try launch()
    defer { host.stop() }
    var w = published(["com.test.paid": "blocked/moduleLocked", "com.test.keeper": "started"], by: host)
    try #require(w.reached, why(w, host))

    try cli(["trust", dir.url("vendor.pub"), "--for", "licences", "--state", state])
    w = published(["com.test.paid": "started", "com.test.keeper": "started"], by: host)
    try #require(w.reached, why(w, host))

    try FileManager.default.removeItem(atPath: state + "/trusted-keys/licences/vendor.pub")
    w = published(["com.test.paid": "blocked/moduleLocked", "com.test.keeper": "started"], by: host)
    #expect(w.reached, why(w, host))
  }

  @Test func aModuleKeyTrustedWhileRunningAdmitsItsModulesWhenSignaturesAreRequired() throws {
    let signed = try module("com.test.signed")
    try cli(["keygen", dir.url("a")])
    try cli(["keygen", dir.url("b")])
    try cli(["sign", signed, "--key", dir.url("b.key")])
    try cli(["trust", dir.url("a.pub"), "--for", "modules", "--state", state])

    let host = try launch(["--require-signatures"])
    defer { host.stop() }
    var w = published(["com.test.signed": "blocked/signatureInvalid"], by: host)
    try #require(w.reached, why(w, host))
    // runtime.json is published before the control socket opens: wait for it to answer.
    try #require(answering(host))

    // The host answers explain with its own options: signatures are required there.
    let explain = try HostBinary.run(["explain", "com.test.signed", "--state", state, "--json"])
    #expect(explain.stderr.contains("answered by the host"), "\(explain.stderr)")
    let signatures = try JSONParser.parse(explain.stdout).objectValue?["signatures"]?.objectValue
    #expect(signatures?["required"] == .bool(true), "\(explain.stdout)")
    #expect(signatures?["finding"] == "untrustedKey", "\(explain.stdout)")
    let text = try HostBinary.run(["explain", "com.test.signed", "--state", state])
    #expect(text.stdout.contains("signatures: required (--require-signatures)"), "\(text.stdout)")

    try cli(["trust", dir.url("b.pub"), "--for", "modules", "--state", state])
    w = published(["com.test.signed": "started"], by: host)
    #expect(w.reached, why(w, host))
  }

  @Test func overrideJSONThroughARunningHostIsOneDocument() throws {
    try module("com.test.keeper")
    let host = try launch()
    defer { host.stop() }
    var w = published(["com.test.keeper": "started"], by: host)
    try #require(w.reached, why(w, host))

    let off = try cli([
      "override", "module", "com.test.keeper", "off", "--in-memory", "--state", state, "--json",
    ])
    let o = try #require(try JSONParser.parse(off.stdout).objectValue, "\(off.stdout)")
    #expect(o["action"] == "set")
    #expect(o["inMemory"] == "off")
    #expect(o["id"] == "com.test.keeper")
    // The state it changed is told on standard error, so standard output stays JSON.
    #expect(off.stderr.contains("host: com.test.keeper is now"), "\(off.stderr)")
    w = published(["com.test.keeper": "blocked/moduleLocked"], by: host)
    try #require(w.reached, why(w, host))

    let clear = try cli([
      "override", "module", "com.test.keeper", "clear", "--in-memory", "--state", state, "--json",
    ])
    let c = try #require(try JSONParser.parse(clear.stdout).objectValue, "\(clear.stdout)")
    #expect(c["action"] == "clear")
    #expect(c["inMemory"] == .null)
    w = published(["com.test.keeper": "started"], by: host)
    try #require(w.reached, why(w, host))

    let persisted = try cli(["override", "module", "com.test.keeper", "off", "--state", state, "--json"])
    let p = try #require(try JSONParser.parse(persisted.stdout).objectValue, "\(persisted.stdout)")
    #expect(p["persisted"] == "off")
    #expect(p["changed"] == .bool(true))
  }
}
