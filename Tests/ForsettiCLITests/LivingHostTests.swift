import ForsettiTestSupport
import Foundation
import Testing

/// A running `forsetti-host run` converges on what the state directory says, without a restart:
/// approvals, licences, entitlements, overrides and the activation state (enable, disable,
/// select, `--default-policy`) each start or stop modules in the same host process.
@Suite(.onTestThreads, .serialized) struct LivingHostTests: LiveHostSuite {
  let dir = TemporaryDirectory("living")

  // MARK: - Trust changes while the host runs

  @Test func approvingAPendingModuleStartsItAndRevokingStopsIt() throws {
    try module("com.test.pending", capabilities: ["storage"])
    try module("com.test.keeper")
    let host = try launch()
    defer { host.stop() }
    let pid = host.process.processIdentifier

    var w = published(
      ["com.test.pending": "blocked/approvalPending", "com.test.keeper": "started"], by: host)
    try #require(w.reached, why(w, host))

    try cli(["approve", "com.test.pending", "--manifests", manifests, "--state", state])
    w = published(["com.test.pending": "started", "com.test.keeper": "started"], by: host)
    try #require(w.reached, why(w, host))
    #expect(host.await("hello from com.test.pending") != nil, "\(host.lines)")

    try cli(["revoke", "com.test.pending", "--state", state])
    w = published(["com.test.pending": "blocked/approvalPending", "com.test.keeper": "started"], by: host)
    try #require(w.reached, why(w, host))
    #expect(host.await("bye from com.test.pending") != nil, "\(host.lines)")
    #expect(host.process.isRunning && host.process.processIdentifier == pid)
  }

  @Test func addingALicenceStartsAPaidModuleAndRemovingItStopsIt() throws {
    let paid = try module("com.test.paid", product: "com.vendor.pro")
    let keeper = try module("com.test.keeper")
    // A vendor key trusted for licences: it signs the licence (and the modules, which this
    // host does not require).
    try cli(["keygen", dir.url("vendor")])
    try FileManager.default.createDirectory(
      atPath: state + "/trusted-keys/licences", withIntermediateDirectories: true)
    try FileManager.default.createDirectory(atPath: state + "/licences", withIntermediateDirectories: true)
    try FileManager.default.copyItem(
      atPath: dir.url("vendor.pub"), toPath: state + "/trusted-keys/licences/vendor.pub")
    for so in [paid, keeper] { try cli(["sign", so, "--key", dir.url("vendor.key")]) }

    let host = try launch()
    defer { host.stop() }
    var w = published(["com.test.paid": "blocked/moduleLocked", "com.test.keeper": "started"], by: host)
    try #require(w.reached, why(w, host))

    // Issued elsewhere, then moved into place, as an operator installs a licence.
    try cli([
      "licence", "--key", dir.url("vendor.key"), "--product", "com.vendor.pro", "--licensee", "Ada",
      "--expires", TrustTests.instant(3600), "--out", dir.url("pro.licence"),
    ])
    #expect(rename(dir.url("pro.licence"), state + "/licences/pro.licence") == 0)
    w = published(["com.test.paid": "started", "com.test.keeper": "started"], by: host)
    try #require(w.reached, why(w, host))

    try FileManager.default.removeItem(atPath: state + "/licences/pro.licence")
    w = published(["com.test.paid": "blocked/moduleLocked", "com.test.keeper": "started"], by: host)
    try #require(w.reached, why(w, host))
    #expect(host.await("bye from com.test.paid") != nil, "\(host.lines)")
  }

  @Test func rewritingTheEntitlementsFileStartsAndStopsAPaidModule() throws {
    try module("com.test.paid", product: "com.vendor.pro")
    try module("com.test.keeper")
    let file = dir.url("entitlements/entitlements.json")
    try LiveHost.replaceFile(file, with: #"{"unlockedProducts":[]}"#)

    let host = try launch(["--entitlements", file])
    defer { host.stop() }
    var w = published(["com.test.paid": "blocked/moduleLocked", "com.test.keeper": "started"], by: host)
    try #require(w.reached, why(w, host))

    try LiveHost.replaceFile(file, with: #"{"unlockedProducts":["com.vendor.pro"]}"#)
    w = published(["com.test.paid": "started", "com.test.keeper": "started"], by: host)
    try #require(w.reached, why(w, host))

    try LiveHost.replaceFile(file, with: #"{"unlockedProducts":["com.vendor.other"]}"#)
    w = published(["com.test.paid": "blocked/moduleLocked", "com.test.keeper": "started"], by: host)
    try #require(w.reached, why(w, host))
  }

  @Test func anOffOverrideStopsARunningModuleAndClearingItStartsItAgain() throws {
    try module("com.test.switched")
    try module("com.test.keeper")
    let host = try launch()
    defer { host.stop() }
    var w = published(["com.test.switched": "started", "com.test.keeper": "started"], by: host)
    try #require(w.reached, why(w, host))

    try cli(["override", "module", "com.test.switched", "off", "--state", state])
    w = published(["com.test.switched": "blocked/moduleLocked", "com.test.keeper": "started"], by: host)
    try #require(w.reached, why(w, host))
    #expect(host.await("bye from com.test.switched") != nil, "\(host.lines)")

    let mark = host.lines.count
    try cli(["override", "module", "com.test.switched", "clear", "--state", state])
    w = published(["com.test.switched": "started", "com.test.keeper": "started"], by: host)
    try #require(w.reached, why(w, host))
    #expect(host.await("hello from com.test.switched", from: mark) != nil, "\(host.lines)")

    // Everything that should run runs: a clean stop.
    host.stop()
    #expect(host.process.terminationStatus == 0, "\(host.lines.suffix(20))")
  }

  // MARK: - Activation state

  @Test func selectingASecondUIModuleStopsTheFirstAndLeavesServicesAlone() throws {
    try module("com.test.uia", type: "ui")
    try module("com.test.uib", type: "ui")
    try module("com.test.svc")
    let host = try launch()
    defer { host.stop() }
    // No activation file: everything eligible is enabled, and one UI module runs, the first by ID.
    var w = published(
      ["com.test.uia": "started", "com.test.uib": "inactive/uiNotSelected", "com.test.svc": "started"],
      by: host)
    try #require(w.reached, why(w, host))

    try activation("select", "com.test.uib")
    w = published(
      ["com.test.uia": "inactive/uiNotSelected", "com.test.uib": "started", "com.test.svc": "started"],
      by: host)
    try #require(w.reached, why(w, host))
    #expect(host.await("bye from com.test.uia") != nil, "\(host.lines)")

    try cli(["select", "--none", "--state", state, "--manifests", manifests])
    w = published(
      [
        "com.test.uia": "inactive/uiNotSelected", "com.test.uib": "inactive/uiNotSelected",
        "com.test.svc": "started",
      ], by: host)
    try #require(w.reached, why(w, host))
    // The service was never restarted by either change.
    let starts = host.lines.filter { $0.hasSuffix("hello from com.test.svc") }
    #expect(starts.count == 1, "\(starts)")
  }

  @Test func theEnabledSetAndTheSelectionSurviveARestart() throws {
    try module("com.test.uia", type: "ui")
    try module("com.test.uib", type: "app")
    try module("com.test.svc1")
    try module("com.test.svc2")
    let first = try launch()
    defer { first.stop() }
    var w = published(
      [
        "com.test.uia": "started", "com.test.uib": "inactive/uiNotSelected", "com.test.svc1": "started",
        "com.test.svc2": "started",
      ], by: first)
    try #require(w.reached, why(w, first))

    try activation("disable", "com.test.svc2")
    w = published(["com.test.svc2": "inactive/moduleDisabled", "com.test.svc1": "started"], by: first)
    try #require(w.reached, why(w, first))
    #expect(first.await("bye from com.test.svc2") != nil, "\(first.lines)")
    try activation("select", "com.test.uib")
    let after: [String: String] = [
      "com.test.uia": "inactive/uiNotSelected", "com.test.uib": "started", "com.test.svc1": "started",
      "com.test.svc2": "inactive/moduleDisabled",
    ]
    w = published(after, by: first)
    try #require(w.reached, why(w, first))
    first.stop()

    let second = try launch()
    defer { second.stop() }
    w = published(after, by: second)
    try #require(w.reached, why(w, second))
    #expect(!second.lines.contains { $0.hasSuffix("hello from com.test.uia") }, "\(second.lines)")
    #expect(!second.lines.contains { $0.hasSuffix("hello from com.test.svc2") }, "\(second.lines)")
  }

  @Test func aDenyPolicyRunsOnlyEnabledOrOverriddenOnFreeModules() throws {
    try module("com.test.enabled")
    try module("com.test.forced")
    try module("com.test.neither")
    try activation("enable", "com.test.enabled")
    try cli(["override", "module", "com.test.forced", "on", "--state", state])

    let host = try launch(["--default-policy", "deny"])
    defer { host.stop() }
    var w = published(
      [
        "com.test.enabled": "started", "com.test.forced": "started",
        "com.test.neither": "inactive/moduleDisabled",
      ], by: host)
    try #require(w.reached, why(w, host))
    #expect(!host.lines.contains { $0.hasSuffix("hello from com.test.neither") }, "\(host.lines)")

    try activation("enable", "com.test.neither")
    w = published(
      ["com.test.enabled": "started", "com.test.forced": "started", "com.test.neither": "started"], by: host)
    try #require(w.reached, why(w, host))

    host.stop()
    #expect(host.process.terminationStatus == 0, "\(host.lines.suffix(20))")
  }

  // MARK: - A host with nothing to run

  @Test func aHostWithNoRunnableModuleKeepsRunningAndStopsCleanly() throws {
    try module("com.test.pending", capabilities: ["storage"])
    let host = try launch()
    defer { host.stop() }
    var w = published(["com.test.pending": "blocked/approvalPending"], by: host)
    #expect(w.reached, why(w, host))
    // Not a sleep: a host that gave up with nothing to run would not be there to start the
    // module approved now (a wait on the event, whatever the machine's load).
    try cli(["approve", "com.test.pending", "--manifests", manifests, "--state", state])
    w = published(["com.test.pending": "started"], by: host)
    #expect(w.reached, "the host exited with nothing to run: \(why(w, host))")
    #expect(host.process.isRunning, "the host exited with nothing to run: \(host.lines.suffix(20))")
    host.stop()
    #expect(host.process.terminationStatus == 0, "\(host.lines.suffix(20))")
  }

  /// Issue 40: after a newer module's files were installed over a running one, `list` showed
  /// the new version `started` while the old one ran until a reload, and nothing said a reload
  /// was pending. 1.0.1 (binary and manifest) installed over a running 1.0.0: `list` shows `1.0.0 (1.0.1
  /// on disk: reload pending)`, `list --json` its `runningVersion`, `explain` how to load it; after
  /// `reload`, 1.0.1 and nothing pending (the control).
  @Test func aVersionInstalledOverARunningModuleReadsAsPendingUntilReloaded() throws {
    try module("com.test.up")
    let host = try launch()
    defer { host.stop() }
    var w = published(["com.test.up": "started"], by: host)
    try #require(w.reached, why(w, host))
    try #require(answering(host))
    // The package of 1.0.1 installed over it: binary and manifest.
    var newer = ModuleFixture(moduleID: "com.test.up", entryPoint: "up_entry")
    newer.version = (1, 0, 1)
    newer.start = "fixture_log(\"hello from com.test.up\"); return FORSETTI_OK;"
    try newer.install(in: dir, name: "up_entry")
    // The host judges again on the change and keeps what it loaded (run reloads on request).
    var shown = ""
    let end = Date().addingTimeInterval(60)
    while Date() < end {
      shown = try HostBinary.run(["list", "--state", state]).stdout
      if shown.contains("reload pending") { break }
      usleep(100_000)
    }
    #expect(shown.contains("1.0.0 (1.0.1 on disk: reload pending)"), "\(shown)")
    let json = try HostBinary.run(["list", "--state", state, "--json"]).stdout
    #expect(
      json.contains(#""runningVersion": "1.0.0""#) || json.contains(#""runningVersion":"1.0.0""#), "\(json)")
    let explained = try HostBinary.run(["explain", "com.test.up", "--state", state]).stdout
    #expect(
      explained.contains("running version 1.0.0; the files hold 1.0.1: `forsetti-host reload com.test.up`"),
      "\(explained)")

    let reloaded = try HostBinary.run(["reload", "com.test.up", "--state", state])
    #expect(reloaded.status == 0, "\(reloaded.stdout)\(reloaded.stderr)")
    w = published(["com.test.up": "started"], by: host)
    #expect(w.reached, why(w, host))
    let after = try HostBinary.run(["list", "--state", state]).stdout
    #expect(after.contains("1.0.1") && !after.contains("reload pending"), "\(after)")
  }

  /// Issue 40: after `apt remove` of a module, `status` still counted it ("1 stopped"). Its
  /// manifest removed under a running host: it stops (`bye`), and `status` counts only the
  /// module still installed; before the removal it counted both (the control).
  @Test func statusNoLongerCountsARemovedModule() throws {
    try module("com.test.stays")
    try module("com.test.goes")
    let host = try launch()
    defer { host.stop() }
    var w = published(["com.test.stays": "started", "com.test.goes": "started"], by: host)
    try #require(w.reached, why(w, host))
    try #require(answering(host))
    let before = try cli(["status", "--state", state]).stdout
    #expect(before.contains("2 modules started"), "\(before)")
    try FileManager.default.removeItem(atPath: manifests + "/goes_entry.json")
    w = published(["com.test.stays": "started", "com.test.goes": "stopped"], by: host)
    #expect(w.reached, why(w, host))
    #expect(host.await("bye from com.test.goes") != nil, "\(host.lines.suffix(10))")
    let after = try cli(["status", "--state", state]).stdout
    #expect(
      after.hasPrefix("running: pid \(host.process.processIdentifier), 1 module started (state directory"),
      "\(after)")
  }
}
