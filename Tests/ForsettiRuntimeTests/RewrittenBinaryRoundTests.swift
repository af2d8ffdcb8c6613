import ForsettiCore
import ForsettiRuntime
import ForsettiTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

/// A round of `LiveHost.process` in which only binaries were rewritten judges again from the
/// last verdicts, inspecting just those binaries. What it decides must be what a full judgement
/// decides: each test changes something the shortcut must not miss, through the host's own
/// watcher and loop.
@Suite(.onTestThreads, .serialized) struct RewrittenBinaryRoundTests {
  typealias Rig = ReconcilerTests.Rig

  static func hot(_ tag: String, entry: String = "hot_entry") -> ModuleFixture {
    var f = ModuleFixture(moduleID: "com.test.hot", entryPoint: entry)
    f.start = "fixture_log(\"\(tag)\"); return FORSETTI_OK;"
    return f
  }

  /// Renames a build of `f` over the installed binary, then runs the host's loop until `done`;
  /// `alsoChange` (a change waking the host `alsoWakes` times) runs just before the rename, and
  /// the loop waits until the watcher has woken the host for both, so that both land in one
  /// round.
  static func rewrite(
    _ r: Rig, _ host: ReconcilerTests.Host, with f: ModuleFixture, alsoChange: () throws -> Void = {},
    alsoWakes: Int = 0, until done: () -> Bool
  ) throws -> Bool {
    let built = try f.build(in: r.h.dir, as: "staging/\(UUID().uuidString).so")
    let before = r.wakes.count.withLock { $0 }
    try alsoChange()
    try #require(rename(built, r.h.dir.url("plugins/hot_entry.so")) == 0)
    // The rename is pending once the host is due (nothing else here makes it due).
    r.until { host.nextDue != nil && r.wakes.count.withLock { $0 } >= before + 1 + alsoWakes }
    return r.until(step: { host.process() }, done)
  }

  @Test func aRewrittenBinaryIsInspectedAgain() throws {
    let r = Rig()
    try Self.hot("v1").install(in: r.h.dir)
    let host = try r.start(development: .init(grace: 0, debounce: 0))
    defer { host.stop() }
    var reports: [ReloadReport] = []
    host.onReload = { reports.append($0) }

    #expect(try Self.rewrite(r, host, with: Self.hot("v2")) { r.exactly("v2") == 1 }, "\(r.lines.suffix(6))")
    #expect(reports.map(\.outcome) == [.reloaded])

    // The entry point is gone from the new build: refused by inspection, the old one serves.
    reports.removeAll()
    #expect(try Self.rewrite(r, host, with: Self.hot("v3", entry: "other_entry")) { !reports.isEmpty })
    #expect(reports.map(\.outcome) == [.rejected(.binaryNotFound)], "\(reports)")
    #expect(r.exactly("v3") == 0)
    #expect(host.manager.isRunning("com.test.hot"))
  }

  /// What a full judgement decides: the new build never runs. In one round with the change it
  /// is refused (under `dev` a version that fails a gate is a refused reload; the running one
  /// keeps serving); should the watcher deliver the change a round earlier, the module stops
  /// then. The shortcut, blind to the change, would have started it.
  static func expectRefused(
    _ r: Rig, _ host: ReconcilerTests.Host, alsoChange: () throws -> Void = {}, alsoWakes: Int = 0
  ) throws {
    var reports: [ReloadReport] = []
    host.onReload = { reports.append($0) }
    #expect(
      try Self.rewrite(r, host, with: Self.hot("v2"), alsoChange: alsoChange, alsoWakes: alsoWakes) {
        !reports.isEmpty || !host.manager.isRunning("com.test.hot")
      },
      "\(r.lines.suffix(8))")
    #expect(reports.allSatisfy { $0.outcome == .rejected(.moduleLocked) }, "\(reports)")
    #expect(r.exactly("v2") == 0, "\(r.lines.suffix(6))")
  }

  @Test func anInMemoryOverrideSetWithoutAReconcileIsHonoured() throws {
    let r = Rig()
    try Self.hot("v1").install(in: r.h.dir)
    let host = try r.start(development: .init(grace: 0, debounce: 0))
    defer { host.stop() }
    // An application sets it and does not ask for a round; the next round must see it.
    host.judge.configuration.inMemoryOverrides.set(channel: .module, id: "com.test.hot", state: .off)
    try Self.expectRefused(r, host)
  }

  @Test func aStateFileChangedInTheSameRoundIsRead() throws {
    let r = Rig()
    try Self.hot("v1").install(in: r.h.dir)
    let host = try r.start(development: .init(grace: 0, debounce: 0))
    defer { host.stop() }
    try Self.expectRefused(r, host, alsoChange: { try r.overrides(["com.test.hot": "off"]) }, alsoWakes: 1)
  }

  /// The activation state is kept from the last full judgement's round for the rounds that only
  /// rejudge binaries: a module disabled in the same round as its rewrite must not start.
  @Test func aModuleDisabledInTheSameRoundDoesNotStart() throws {
    let r = Rig()
    try Self.hot("v1").install(in: r.h.dir)
    let host = try r.start(development: .init(grace: 0, debounce: 0))
    defer { host.stop() }
    var reports: [ReloadReport] = []
    host.onReload = { reports.append($0) }
    let disable = { () throws in
      _ = try ActivationStore(stateDirectory: r.state).update { $0.disable("com.test.hot") }
    }
    #expect(
      try Self.rewrite(r, host, with: Self.hot("v2"), alsoChange: disable, alsoWakes: 1) {
        !host.manager.isRunning("com.test.hot")
      },
      "\(r.lines.suffix(8))")
    #expect(r.exactly("v2") == 0, "\(r.lines.suffix(6))")
    #expect(!reports.contains { $0.outcome == .reloaded }, "\(reports)")
  }

  @Test func afterARoundThatCouldNotJudgeARewrittenBinaryChangesNothing() throws {
    let r = Rig()
    try Self.hot("v1").install(in: r.h.dir)
    let host = try r.start(development: .init(grace: 0, debounce: 0))
    defer { host.stop() }
    try ForsettiTestSupport.LiveHost.replaceFile(r.state + "/overrides.json", with: "{ not json")
    #expect(r.until(step: { host.process() }) { r.count("not reconciled") == 1 }, "\(r.lines.suffix(6))")

    // Still unreadable: a full judgement fails again, and the running version keeps serving.
    #expect(try Self.rewrite(r, host, with: Self.hot("v2")) { r.count("not reconciled") == 2 })
    #expect(r.exactly("v2") == 0, "\(r.lines.suffix(6))")
    #expect(host.manager.isRunning("com.test.hot"))
  }
}
