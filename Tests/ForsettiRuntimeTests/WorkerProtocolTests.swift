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
@Suite(.onTestThreads, .timeLimit(.minutes(5))) struct WorkerProtocolTests {
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
    // Driven as the module manager drives it, through the protocol's reading of each event.
    var progress = WorkerStartProgress(fromSpare: false, confined: false, loaded: false, startSent: false)
    let deadline = ContinuousClock.now + .seconds(20)
    while let e = worker.events.next(until: deadline) {
      switch worker.startStep(after: e, progress) {
      case .confined(let summary):
        #expect(summary.hasPrefix("confined: "))
        progress.confined = true
      case .loaded(let descriptor, _):
        #expect(descriptor.moduleID == fixture.moduleID)
        progress.loaded = true
        progress.startSent = worker.start(state: [])
      case .started:
        return worker
      case .failed(_, _, let detail, _):
        throw NotStarted(description: "\(fixture.moduleID) did not start: \(detail)")
      case .spareLost, .nothing:
        continue
      }
    }
    _ = worker.startTimedOut(progress, after: 20)
    throw NotStarted(description: "\(fixture.moduleID) did not start in time: \(worker.recentLines)")
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
    #expect(w.saveModuleState(timeout: 60) == nil)
    #expect(w.stopModule(timeout: 60) == .stopped)
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
    let outcome = w.stopModule(timeout: 60)
    guard case .crashed(let why) = outcome else {
      Issue.record("\(outcome)")
      return
    }
    #expect(why.hasPrefix("worker killed by SIGABRT"), "\(why)")
    #expect(why.contains("during stop; last lines: ") && why.contains("about to abort"), "\(why)")
    #expect(Self.gone(w))
  }

  @Test func aModuleThatForgesAFrameInStopBrokeTheProtocolDuringStop() throws {
    let dir = TemporaryDirectory("protocol")
    // A frame of kind 4242 (none), written on the worker's socket from inside `stop`.
    let forge = "unsigned char b[12] = {0x92, 0x10}; send(3, b, sizeof b, MSG_NOSIGNAL); sleep(30);"
    let w = try Self.started(
      Self.fixture("forger", stop: forge, prelude: "#include <sys/socket.h>"), in: dir, log: MemoryLogSink())
    let outcome = w.stopModule(timeout: 25)
    guard case .violated(let v) = outcome else {
      Issue.record("\(outcome)")
      return
    }
    #expect(v.kind == 4242 && v.phase == .stopping, "\(v)")
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
    #expect(w.saveModuleState(timeout: 60) == Array("count=41".utf8))
    // Asked again, it answers again: the session is back to started.
    #expect(w.saveModuleState(timeout: 60) == Array("count=41".utf8))
    #expect(w.stopModule(timeout: 60) == .stopped)
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
    #expect(w.stopModule(timeout: 60) == .stopped)
    #expect(w.session.violation == nil)
    #expect(w.recentLines.contains("saved late"))
  }

  // MARK: The protocol version

  /// A stand-in for a forsetti-worker of another build: it reads `configure` and answers with
  /// a `confined` that names protocol 99 (or, for `com.test.ancient`, none, as workers did
  /// before versions), then says nothing more, as a worker that went on in its own dialect.
  static let foreignWorker = """
    #define _GNU_SOURCE
    #include <stdint.h>
    #include <string.h>
    #include <unistd.h>
    #include <sys/socket.h>
    int main(void) {
      static unsigned char in[131072], out[512];
      ssize_t n = recv(3, in, sizeof in, 0);
      if (n <= 0) return 0;
      const char *json = memmem(in, (size_t)n, "com.test.ancient", 16)
        ? "{\\"capabilitiesDropped\\":true}"
        : "{\\"protocolVersion\\":99,\\"capabilitiesDropped\\":true}";
      uint32_t kind = 100, size = (uint32_t)strlen(json);
      uint64_t id = 0;
      unsigned char tag = 2;
      size_t len = 0;
      memcpy(out + len, &kind, 4); len += 4;
      memcpy(out + len, &id, 8); len += 8;
      out[len++] = tag;
      memcpy(out + len, &size, 4); len += 4;
      memcpy(out + len, json, size); len += size;
      send(3, out, len, MSG_NOSIGNAL);
      for (;;) pause();
    }
    """

  @Test func aWorkerOfAnotherProtocolIsALoadFailureNamingBothVersions() throws {
    let h = RuntimeHarness()
    let src = try h.dir.write("src/foreign-worker.c", Self.foreignWorker)
    let foreign = h.dir.url("foreign-worker")
    let cc = try ProcessRunner.run("/usr/bin/env", ["cc", "-Wall", "-o", foreign, src])
    try #require(cc.status == 0, "\(cc.stderr)")
    try Self.fixture("future").install(in: h.dir)
    try Self.fixture("ancient").install(in: h.dir)
    guard case .isolated(var settings) = RuntimeHarness.isolated(backoff: 0.05) else { return }
    settings.workerExecutable = foreign
    // Generous: a module that got past the version would hang here, and fail as a timeout.
    settings.startTimeout = 10
    let m = try h.start(mode: .isolated(settings))
    let host = ProtocolVersion.current
    for (id, worker) in [("com.test.future", 99), ("com.test.ancient", 0)] {
      #expect(h.state(id) == .failed(.loadFailed), "\(id): \(String(describing: h.state(id)))")
      let failure = h.record(id)?.trace.firstFailure
      #expect(failure?.step == .load)
      #expect(
        failure?.detail
          == "forsetti-worker speaks protocol \(worker); this host speaks \(host): install the worker from the same build as the host",
        "\(String(describing: failure?.detail))")
    }
    // Not a crash: nothing is restarted, and supervision leaves the verdict alone.
    #expect(m.nextRestart == nil)
    h.supervise(timeout: 0.5) { false }
    #expect(h.state("com.test.future") == .failed(.loadFailed))
    #expect(!h.log.all.contains { $0.message.contains("restart") || $0.message.contains("crashed") })
    m.stopAll()
  }

  /// `configure` payloads of hosts that speak another protocol: a later one, and one from before
  /// versions (no `protocolVersion` at all).
  static let foreignHosts: [(json: String, version: Int)] = [
    (
      JSONWriter.string(
        WorkerConfiguration(
          moduleID: "com.test.never", library: "/nonexistent/never.so", entryPoint: "never_entry",
          isSwift: false, sandbox: "/nonexistent",
          granted: [],
          policy: ConfinementPolicy(readExecute: [], readWrite: [], networking: false, limits: .init()),
          parent: getpid(), protocolVersion: ProtocolVersion.current + 1
        ).json), ProtocolVersion.current + 1
    ),
    (
      #"{"moduleID":"com.test.never","library":"/nonexistent/never.so","entryPoint":"e","sandbox":"/x","parent":\#(getpid())}"#,
      0
    ),
  ]

  @Test(arguments: foreignHosts.indices)
  func theWorkerRefusesAHostOfAnotherProtocolBeforeConfiningAnything(_ k: Int) throws {
    let (json, version) = Self.foreignHosts[k]
    let started = try StartedWorker.spawn(executable: Self.workerExecutable)
    defer {
      started.calls.close()
      close(started.socket.fd)
      close(started.outputFD)
    }
    #expect(started.socket.send(WireFrame(.configure, [.string(json)])))
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Wire.maxFrame, alignment: 8)
    defer { buffer.deallocate() }
    // Its first word is the refusal: no `confined` before it, so nothing was confined or loaded.
    guard case .frame(let f) = started.socket.receive(into: buffer) else {
      Issue.record("the worker said nothing")
      return
    }
    #expect(f.kind == .loadFailed, "\(f.kind)")
    #expect(f.string(0) == "loadFailed")
    #expect(
      f.string(1)
        == "forsetti-worker speaks protocol \(ProtocolVersion.current); this host speaks \(version): install the worker from the same build as the host",
      "\(String(describing: f.string(1)))")
    guard case .closed = started.socket.receive(into: buffer) else {
      Issue.record("the worker said more after refusing")
      return
    }
    var status: Int32 = 0
    #expect(waitpid(started.pid, &status, 0) == started.pid)
    #expect(
      WorkerEnding.describe(status: status) == "exited with status \(WorkerMain.protocolMismatchStatus)")
  }
}
