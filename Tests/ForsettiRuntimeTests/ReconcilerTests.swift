import CForsetti
import ForsettiBinary
import ForsettiCore
import ForsettiRuntime
import ForsettiTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

/// A `LiveHost` driven by hand on real modules and a real state directory: what reconciliation
/// does when a state file changes while a module is failed, quarantined, waiting to restart or
/// freshly rolled back. The host's loop is this test: it calls `process`, `reconcile` and
/// `superviseOnce` itself, so each round is one the test chose.
@Suite(.onTestThreads, .serialized) struct ReconcilerTests {
  /// The runtime's host (the test support's `LiveHost` reads what a host publishes).
  typealias Host = ForsettiRuntime.LiveHost

  /// How often a host woke its loop, counted from the watcher's thread.
  final class Wakes: Sendable {
    let count = Mutex(0)
  }

  /// One host on one temporary directory.
  final class Rig {
    let h = RuntimeHarness()
    let wakes = Wakes()
    var state: String { h.dir.url("state") }

    /// Installs a module that logs `hello ID` on start (then runs `start`) and `bye ID` on stop.
    @discardableResult
    func module(
      _ id: String, type: String = "service", capabilities: [String] = [], product: String? = nil,
      start: String = "return FORSETTI_OK;"
    ) throws -> String {
      var f = Self.fixture(id, type: type, start: start)
      f.type = type
      return try f.install(
        in: h.dir, capabilities: capabilities,
        manifestExtra: product.map { #","iapProductID":"\#($0)""# } ?? "")
    }

    static func fixture(_ id: String, type: String = "service", start: String = "return FORSETTI_OK;")
      -> ModuleFixture
    {
      let entry = (id.split(separator: ".").last.map(String.init) ?? "m") + "_entry"
      var f = ModuleFixture(moduleID: id, entryPoint: entry)
      f.type = type
      f.start = "fixture_log(\"hello \(id)\"); \(start)"
      f.stop = "fixture_log(\"bye \(id)\");"
      return f
    }

    /// A started host; `development` turns on version copies as `dev` does.
    func start(
      mode: ExecutionMode = .inProcess, development: Host.Development? = nil, approveAll: Bool = true,
      entitlements: String? = nil, policy: DefaultPolicy = .allow
    ) throws -> Host {
      let config = HostConfiguration(
        manifestsDirectory: h.dir.url("manifests"), pluginDirectories: [h.dir.url("plugins")],
        entitlementsFile: entitlements, approveAll: approveAll, stateDirectory: state, defaultPolicy: policy)
      let manager = ModuleManager(environment: HostEnvironment(stateDirectory: state, log: h.log), mode: mode)
      manager.versionCopies = development != nil
      let wakes = self.wakes
      let host = Host(judge: Judge(config), manager: manager, development: development) {
        wakes.count.withLock { $0 += 1 }
      }
      try host.start()
      return host
    }

    func record(_ host: Host, _ id: String) -> ModuleRecord? {
      host.manager.records.first { $0.moduleID == id }
    }
    func state(_ host: Host, _ id: String) -> ModuleState? { record(host, id)?.state }

    /// Every line logged so far, host and modules alike.
    var lines: [String] { h.log.all.map(\.message) }
    /// Lines containing `text` (host lines quote a module's last lines, so module lines are
    /// counted with `exactly`).
    func count(_ text: String) -> Int { lines.filter { $0.contains(text) }.count }
    func exactly(_ text: String) -> Int { lines.filter { $0 == text }.count }

    /// Repeats `step` every 20 ms until `done` holds or `timeout` seconds pass (a safety net,
    /// generous so that a loaded machine makes the wait longer, not the verdict different).
    @discardableResult
    func until(timeout: Double = 30, step: () -> Void = {}, _ done: () -> Bool) -> Bool {
      let end = Date().addingTimeInterval(timeout)
      while Date() < end {
        step()
        if done() { return true }
        usleep(20_000)
      }
      return done()
    }

    /// Writes STATE/overrides.json as `forsetti-host override module` does: module ID → on/off.
    func overrides(_ modules: [String: String]) throws {
      let body = modules.sorted { $0.key < $1.key }.map { #""\#($0.key)":{"state":"\#($0.value)"}"# }
      try ForsettiTestSupport.LiveHost.replaceFile(
        state + "/overrides.json",
        with: #"{"version":1,"modules":{"# + body.joined(separator: ",") + #"},"products":{}}"#)
    }

    /// Processes until the host has been woken since `before` wakes and has handled what woke it
    /// (nothing due any more): a wait on the event, where a sleep would pass unchecked when slow.
    @discardableResult
    func took(_ host: Host, wakesBefore before: Int) -> Bool {
      until(step: { host.process() }) { wakes.count.withLock { $0 } > before && host.nextDue == nil }
    }

    /// Kills module `id`'s worker as a crash would, and lets supervision record it.
    func crash(_ host: Host, _ id: String) throws {
      let pid = try #require(host.manager.workerPID(id))
      kill(pid, SIGKILL)
      try #require(
        until(step: { host.manager.superviseOnce() }) { state(host, id) == .failed(.crashed) },
        "\(lines.suffix(10))")
    }
  }

  // MARK: - Bugs: verdicts ignored while a restart is pending

  /// A crashed module waiting for its restart is disabled by the operator: the restart must not
  /// happen (supervision restarts it anyway, and nothing stops it again).
  @Test func aModuleDisabledDuringItsRestartBackoffIsNotRestarted() throws {
    let r = Rig()
    try r.module("com.test.crashy")
    try r.module("com.test.keeper")
    let host = try r.start(mode: RuntimeHarness.isolated(maxRestarts: 3, backoff: 0.4))
    defer { host.stop() }
    try #require(r.state(host, "com.test.crashy") == .started)
    try r.crash(host, "com.test.crashy")

    // Disabled while the restart is pending; the host's loop sees the change and reconciles.
    _ = try ActivationStore(stateDirectory: r.state).update { $0.disable("com.test.crashy") }
    host.reconcile()
    // Positive control in place of a sleep past the backoff: the keeper, crashed after it, is
    // restarted once its own (later) backoff is over, so crashy's was over too.
    try r.crash(host, "com.test.keeper")
    #expect(
      r.until(step: { host.manager.superviseOnce() }) { r.count("restarting com.test.keeper") > 0 },
      "the keeper's restart, the control, never came: \(r.lines.suffix(12))")
    host.manager.superviseOnce()

    #expect(!host.manager.isRunning("com.test.crashy"), "\(r.lines.suffix(12))")
    #expect(r.count("restarting com.test.crashy") == 0, "\(r.lines.suffix(12))")
    #expect(r.state(host, "com.test.crashy") == .inactive(.moduleDisabled))
  }

  /// A capability revoked while a crashed module waits for its restart must not come back with
  /// the restart: the restart uses the grant recorded before the crash.
  @Test func aCapabilityRevokedDuringRestartBackoffIsNotGrantedOnRestart() throws {
    let r = Rig()
    try r.module("com.test.crashy", capabilities: ["storage", "telemetry"])
    let approvals = ApprovalStore(stateDirectory: r.state)
    try FileManager.default.createDirectory(atPath: r.state, withIntermediateDirectories: true)
    try approvals.save(ApprovalLedger(approved: ["com.test.crashy": [.storage, .telemetry]]))
    let host = try r.start(mode: RuntimeHarness.isolated(maxRestarts: 3, backoff: 0.4), approveAll: false)
    defer { host.stop() }
    try #require(r.state(host, "com.test.crashy") == .started)
    #expect(r.record(host, "com.test.crashy")?.granted == [.storage, .telemetry])
    try r.crash(host, "com.test.crashy")

    _ = try approvals.revoke("com.test.crashy", [.telemetry])
    host.reconcile()
    #expect(
      r.until(step: { host.manager.superviseOnce() }) {
        host.manager.isRunning("com.test.crashy")
      })

    #expect(r.record(host, "com.test.crashy")?.granted == [.storage], "\(r.lines.suffix(12))")
  }

  // MARK: - Bugs: a judging failure that changes what runs

  /// A malformed overrides.json is read as "no overrides": a paid module forced on stops and a
  /// module forced off starts, where a malformed approvals.json changes nothing.
  @Test func aMalformedOverridesFileWhileRunningChangesNothing() throws {
    let r = Rig()
    try r.module("com.test.paid", product: "com.vendor.pro")
    try r.module("com.test.off")
    try FileManager.default.createDirectory(atPath: r.state, withIntermediateDirectories: true)
    let overrides = OverrideStore(stateDirectory: r.state)
    try r.overrides(["com.test.paid": "on", "com.test.off": "off"])
    let host = try r.start()
    defer { host.stop() }
    try #require(r.state(host, "com.test.paid") == .started, "\(r.lines)")
    try #require(r.state(host, "com.test.off") == .blocked(.moduleLocked), "\(r.lines)")

    // A half-finished edit: the file is not JSON.
    try Data(#"{"version":1,"modules":{"com.test.paid":{"state":"on"},"#.utf8).write(
      to: URL(fileURLWithPath: overrides.path))
    host.reconcile()

    #expect(r.state(host, "com.test.paid") == .started, "\(r.lines.suffix(8))")
    #expect(!host.manager.isRunning("com.test.off"), "\(r.lines.suffix(8))")
    #expect(r.lines.contains { $0.contains("not reconciled") }, "\(r.lines.suffix(8))")
  }

  // MARK: - Bugs: dev's refused versions

  /// After a rollback the old version runs from its copy; when it later crashes, its restart
  /// must start that version again, not the binary that was just refused.
  @Test func aRolledBackModuleRestartedAfterACrashRunsItsOldVersion() throws {
    let r = Rig()
    let so = try r.module("com.test.rb")
    let host = try r.start(
      mode: RuntimeHarness.isolated(maxRestarts: 3, backoff: 0.2),
      development: .init(grace: 0.3, debounce: 0.05))
    defer { host.stop() }
    try #require(r.state(host, "com.test.rb") == .started)

    // A new build whose start fails: the reload rolls back to the running version.
    var broken = Rig.fixture("com.test.rb", start: "fixture_log(\"v2\"); return FORSETTI_ERR_START_FAILED;")
    broken.version = (1, 0, 0)
    try broken.build(in: r.h.dir, as: "plugins/rb_entry.so")
    var reports: [ReloadReport] = []
    host.onReload = { reports.append($0) }
    host.reconcile(changed: [so])
    try #require(reports.map(\.outcome) == [.rolledBack(.startFailed)], "\(reports) \(r.lines.suffix(10))")
    try #require(r.state(host, "com.test.rb") == .started)

    // The old version crashes; supervision restarts it.
    let v2Before = r.exactly("v2")
    try r.crash(host, "com.test.rb")
    r.until(step: { host.manager.superviseOnce() }) { r.count("restarting com.test.rb") > 0 }

    #expect(r.state(host, "com.test.rb") == .started, "\(r.lines.suffix(10))")
    #expect(r.exactly("v2") == v2Before, "the refused build ran: \(r.lines.suffix(10))")
  }

  /// A rebuilt binary refused by a gate (here: it no longer exports the entry point) leaves the
  /// old version serving — until any unrelated state change, which stops it for good.
  @Test func aRefusedBinaryReloadKeepsTheOldVersionThroughAnUnrelatedChange() throws {
    let r = Rig()
    let so = try r.module("com.test.keep")
    let host = try r.start(development: .init(grace: 0.1, debounce: 0.05))
    defer { host.stop() }
    try #require(r.state(host, "com.test.keep") == .started)

    var renamed = ModuleFixture(moduleID: "com.test.keep", entryPoint: "renamed_entry")
    renamed.start = "return FORSETTI_OK;"
    try renamed.build(in: r.h.dir, as: "plugins/keep_entry.so")
    var reports: [ReloadReport] = []
    host.onReload = { reports.append($0) }
    host.reconcile(changed: [so])
    try #require(reports.count == 1, "\(reports)")
    if case .rejected = reports[0].outcome {} else { Issue.record("expected a rejected reload: \(reports)") }
    try #require(host.manager.isRunning("com.test.keep"), "\(r.lines.suffix(8))")

    // Something unrelated changes: another module's override.
    try r.overrides(["com.test.other": "off"])
    host.reconcile()
    #expect(host.manager.isRunning("com.test.keep"), "\(r.lines.suffix(8))")
  }

  // MARK: - Bugs: watches

  /// The entitlements file as Kubernetes mounts a ConfigMap: a symlink through `..data`, which is
  /// swapped atomically. The swap is a change of the file's content and must be seen.
  @Test func anEntitlementsFileSwappedThroughASymlinkIsSeen() throws {
    let r = Rig()
    try r.module("com.test.paid", product: "com.vendor.pro")
    let ent = r.h.dir.url("ent")
    let fm = FileManager.default
    try fm.createDirectory(atPath: ent + "/..v1", withIntermediateDirectories: true)
    try Data(#"{"unlockedProducts":[]}"#.utf8).write(
      to: URL(fileURLWithPath: ent + "/..v1/entitlements.json"))
    try fm.createSymbolicLink(atPath: ent + "/..data", withDestinationPath: "..v1")
    try fm.createSymbolicLink(
      atPath: ent + "/entitlements.json", withDestinationPath: "..data/entitlements.json")
    let host = try r.start(entitlements: ent + "/entitlements.json")
    defer { host.stop() }
    try #require(r.state(host, "com.test.paid") == .blocked(.moduleLocked), "\(r.lines)")

    try fm.createDirectory(atPath: ent + "/..v2", withIntermediateDirectories: true)
    try Data(#"{"unlockedProducts":["com.vendor.pro"]}"#.utf8).write(
      to: URL(fileURLWithPath: ent + "/..v2/entitlements.json"))
    try fm.createSymbolicLink(atPath: ent + "/..data_tmp", withDestinationPath: "..v2")
    #expect(rename(ent + "/..data_tmp", ent + "/..data") == 0)

    #expect(
      r.until(step: { host.process() }) { r.state(host, "com.test.paid") == .started },
      "\(r.lines.suffix(8))")
  }

  /// A stopped host watches nothing: an embedding application that stops one must not keep its
  /// inotify descriptors and threads, still waking it on every change.
  @Test func aStoppedHostNoLongerWatches() throws {
    let r = Rig()
    try r.module("com.test.one")
    let host = try r.start()
    let woken = { r.wakes.count.withLock { $0 } }
    // Positive control: the same change wakes the host while it runs; how long that takes here
    // and now sets the quiet window below.
    let running = woken()
    let saved = Date()
    try ApprovalStore(stateDirectory: r.state).save(ApprovalLedger(approved: ["com.test.one": [.storage]]))
    #expect(r.until { woken() > running }, "a running host was not woken by the change either")
    let reaction = Date().timeIntervalSince(saved)
    let window = min(30, max(0.3, 5 * reaction))
    host.stop()
    usleep(UInt32(window * 1_000_000))  // what was under way at the stop lands first
    let before = woken()
    try ApprovalStore(stateDirectory: r.state).save(ApprovalLedger(approved: ["com.test.one": []]))
    usleep(UInt32(window * 1_000_000))
    #expect(
      woken() == before,
      "the stopped host was woken by a file change within \(window) s (a running one took \(reaction) s)")
  }

  // MARK: - Bugs: activation

  /// The first UI module by ID fails to start: another eligible UI module should run instead of
  /// none at all (exactly one UI module runs while one can).
  @Test func aUIModuleThatFailsToStartDoesNotLeaveTheHostWithoutUI() throws {
    let r = Rig()
    try r.module("com.test.uia", type: "ui", start: "return FORSETTI_ERR_START_FAILED;")
    try r.module("com.test.uib", type: "ui")
    let host = try r.start()
    defer { host.stop() }
    #expect(r.state(host, "com.test.uia") == .failed(.startFailed))
    #expect(r.state(host, "com.test.uib") == .started, "\(r.lines.suffix(8))")
  }

  // MARK: - Promised behaviour, pinned

  /// A module whose start failed waits for a new version: an unrelated change of the state
  /// directory does not try it again.
  @Test func aModuleThatFailedToStartIsNotRetriedOnAnUnrelatedChange() throws {
    let r = Rig()
    try r.module("com.test.broken", start: "return FORSETTI_ERR_START_FAILED;")
    try r.module("com.test.keeper")
    let host = try r.start()
    defer { host.stop() }
    try #require(r.state(host, "com.test.broken") == .failed(.startFailed))
    #expect(r.exactly("hello com.test.broken") == 1)

    _ = try ActivationStore(stateDirectory: r.state).update { $0.enable("com.test.keeper") }
    host.reconcile()
    try r.overrides(["com.test.keeper": "on"])
    host.reconcile()

    #expect(r.exactly("hello com.test.broken") == 1, "\(r.lines.suffix(8))")
    #expect(r.state(host, "com.test.broken") == .failed(.startFailed))
    #expect(r.exactly("hello com.test.keeper") == 1, "\(r.lines.suffix(8))")
  }

  /// A quarantined module stays quarantined whatever else changes.
  @Test func aQuarantinedModuleIsNotRestartedByAReconciliation() throws {
    let r = Rig()
    try r.module("com.test.q")
    let host = try r.start(mode: RuntimeHarness.isolated(maxRestarts: 0, backoff: 0.05))
    defer { host.stop() }
    try #require(r.state(host, "com.test.q") == .started)
    let pid = try #require(host.manager.workerPID("com.test.q"))
    kill(pid, SIGKILL)
    try #require(
      r.until(step: { host.manager.superviseOnce() }) {
        r.state(host, "com.test.q") == .failed(.quarantined)
      },
      "\(r.lines.suffix(8))")

    let before = r.wakes.count.withLock { $0 }
    _ = try ActivationStore(stateDirectory: r.state).update { $0.enable("com.test.q") }
    host.reconcile()
    try ApprovalStore(stateDirectory: r.state).save(ApprovalLedger(approved: ["com.test.other": [.storage]]))
    host.reconcile()
    // The host's own round for those changes, waited for rather than slept past.
    #expect(r.took(host, wakesBefore: before), "\(r.lines.suffix(8))")

    #expect(r.state(host, "com.test.q") == .failed(.quarantined), "\(r.lines.suffix(8))")
    #expect(r.exactly("hello com.test.q") == 1, "\(r.lines.suffix(8))")
  }

  /// approvals.json written again with the same content (a tool re-saving it) restarts nothing.
  @Test func rewritingApprovalsWithTheSameContentRestartsNothing() throws {
    let r = Rig()
    try r.module("com.test.approved", capabilities: ["storage", "telemetry"])
    let approvals = ApprovalStore(stateDirectory: r.state)
    try FileManager.default.createDirectory(atPath: r.state, withIntermediateDirectories: true)
    let ledger = ApprovalLedger(approved: ["com.test.approved": [.storage, .telemetry]])
    try approvals.save(ledger)
    let host = try r.start(approveAll: false)
    defer { host.stop() }
    try #require(r.state(host, "com.test.approved") == .started)

    let before = r.wakes.count.withLock { $0 }
    try approvals.save(ledger)
    host.reconcile()
    // The host's own round for the rewrite, waited for rather than slept past.
    #expect(r.took(host, wakesBefore: before), "\(r.lines.suffix(8))")

    #expect(r.exactly("hello com.test.approved") == 1, "\(r.lines.suffix(8))")
    #expect(r.exactly("bye com.test.approved") == 0, "\(r.lines.suffix(8))")
    #expect(r.count("restarted com.test.approved") == 0, "\(r.lines.suffix(8))")
  }
}
