import CForsetti
import ForsettiBridge
import ForsettiCore
import ForsettiTestSupport
import Foundation
import Glibc
import Testing

@testable import ForsettiRuntime

/// The host's half of the worker protocol (`WorkerProtocol.swift`) against the real
/// forsetti-worker serving real modules: stopping and saving state as the host's callers see it.
@Suite struct WorkerProtocolTests {
  static var workerExecutable: String {
    ((HostBinary.path as NSString).deletingLastPathComponent as NSString).appendingPathComponent(
      "forsetti-worker")
  }

  struct NotStarted: Error, CustomStringConvertible {
    var description: String
  }

  /// A real worker serving `fixture`, brought to started through the protocol (no cgroup: the
  /// module manager is not involved).
  static func started(_ fixture: ModuleFixture, in dir: TemporaryDirectory, log: MemoryLogSink) throws
    -> WorkerProcess
  {
    let so = try fixture.build(in: dir, as: "plugins/\(fixture.entryPoint).so")
    let sandbox = dir.url("sandbox/\(fixture.moduleID)")
    _ = try SandboxStorage(root: sandbox)
    let policy = ConfinementPolicy(
      readExecute: [so, dir.url("plugins"), workerExecutable, "/etc/ld.so.cache"]
        + IsolationSettings.libraryDirectories(),
      readWrite: [sandbox, "/dev/null"], networking: false, limits: ResourceLimits())
    let configuration = WorkerConfiguration(
      moduleID: fixture.moduleID, library: so, entryPoint: fixture.entryPoint, isSwift: false,
      sandbox: sandbox,
      granted: [], policy: policy, parent: getpid())
    let worker = WorkerProcess(
      try StartedWorker.spawn(executable: workerExecutable), configuration: configuration, cgroup: nil,
      environment: HostEnvironment(stateDirectory: dir.url("state"), log: log), onExit: { _, _ in })
    let deadline = ContinuousClock.now + .seconds(20)
    while let e = worker.events.next(until: deadline) {
      guard case .frame(let f) = e else { break }
      if f.kind == .loaded, !worker.start(state: []) { break }
      if f.kind == .startResult, f.int(0) == Int64(FORSETTI_OK) { return worker }
    }
    worker.end()
    throw NotStarted(description: "\(fixture.moduleID) did not start: \(worker.recentLines)")
  }

  static func fixture(_ name: String, stop: String = "", prelude: String = "", tableExtra: String = "")
    -> ModuleFixture
  {
    var f = ModuleFixture(moduleID: "com.test.\(name)", entryPoint: "\(name)_entry")
    f.stop = stop
    f.prelude = prelude
    f.tableExtra = tableExtra
    return f
  }

  /// Whether the worker's process is gone (reaped by the host).
  static func gone(_ w: WorkerProcess) -> Bool { w.exitStatus() != nil }

  @Test func aModuleThatReturnsFromStopIsStopped() throws {
    let dir = TemporaryDirectory("protocol")
    let w = try Self.started(
      Self.fixture("clean", stop: "fixture_log(\"clean stop\");"), in: dir, log: MemoryLogSink())
    // It keeps no state: asked anyway, it says so.
    #expect(w.saveModuleState(timeout: 5) == nil)
    #expect(w.stopModule(timeout: 5) == .stopped)
    #expect(w.recentLines.contains("clean stop"))
    #expect(Self.gone(w))
  }

  @Test func aModuleThatHangsInStopIsKilledAfterTheTimeout() throws {
    let dir = TemporaryDirectory("protocol")
    let w = try Self.started(Self.fixture("hang", stop: "sleep(30);"), in: dir, log: MemoryLogSink())
    #expect(w.stopModule(timeout: 0.5) == .killedAfterTimeout(0.5))
    #expect(Self.gone(w))
  }

  @Test func aModuleThatCrashesInStopIsReportedWithItsLastLines() throws {
    let dir = TemporaryDirectory("protocol")
    let w = try Self.started(
      Self.fixture("abort", stop: "fixture_log(\"about to abort\"); abort();"), in: dir, log: MemoryLogSink())
    let outcome = w.stopModule(timeout: 5)
    guard case .crashed(let why) = outcome else {
      Issue.record("\(outcome)")
      return
    }
    #expect(why.hasPrefix("worker killed by SIGABRT"), "\(why)")
    #expect(why.contains("during stop; last lines: ") && why.contains("about to abort"), "\(why)")
    #expect(Self.gone(w))
  }

  @Test func savedStateIsHandedOver() throws {
    let dir = TemporaryDirectory("protocol")
    let save = """
      static forsetti_status save(void *self, forsetti_state_writer write, void *ctx) {
        (void)self; return write(ctx, "count=41", 8);
      }
      """
    let w = try Self.started(
      Self.fixture("saver", prelude: save, tableExtra: ".save_state = save,"), in: dir, log: MemoryLogSink())
    #expect(w.saveModuleState(timeout: 5) == Array("count=41".utf8))
    // Asked again, it answers again: the session is back to started.
    #expect(w.saveModuleState(timeout: 5) == Array("count=41".utf8))
    #expect(w.stopModule(timeout: 5) == .stopped)
  }

  @Test func aSaveNotAnsweredInTimeIsGivenUpAndItsLateAnswerDropped() throws {
    let dir = TemporaryDirectory("protocol")
    // Answers, but only after the host stopped waiting.
    let save = """
      static forsetti_status save(void *self, forsetti_state_writer write, void *ctx) {
        (void)self; sleep(1); fixture_log("saved late"); return write(ctx, "late", 4);
      }
      """
    let w = try Self.started(
      Self.fixture("slowsaver", prelude: save, tableExtra: ".save_state = save,"), in: dir,
      log: MemoryLogSink())
    #expect(w.saveModuleState(timeout: 0.2) == nil)
    // The late `stateSaved` is no violation: the module stops cleanly once it gets to `stop`.
    #expect(w.stopModule(timeout: 10) == .stopped)
    #expect(w.session.violation == nil)
    #expect(w.recentLines.contains("saved late"))
  }
}
