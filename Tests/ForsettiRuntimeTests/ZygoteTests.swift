import CForsetti
import ForsettiCore
import ForsettiTestSupport
import Foundation
import Glibc
import Testing

@testable import ForsettiRuntime

/// Workers forked by the zygote (`Zygote.swift`, `ZygoteMain.swift`): what an operator and a
/// module see of them, and that they are the same confined, separate processes a spawned worker
/// is.
@Suite(.onTestThreads, .timeLimit(.minutes(5))) struct ZygoteTests {
  static func status(_ pid: Int32) -> [String: String] {
    let text = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
    var fields: [String: String] = [:]
    for line in text.split(separator: "\n") {
      guard let colon = line.firstIndex(of: ":") else { continue }
      fields[String(line[..<colon])] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    return fields
  }

  static func commandLine(_ pid: Int32) -> [String] {
    let raw = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline"))) ?? Data()
    return raw.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
  }

  /// The socket inodes behind a process's descriptors ("socket:[123]").
  static func sockets(_ pid: Int32) -> Set<String> {
    let dir = "/proc/\(pid)/fd"
    let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
    return Set(
      names.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "\(dir)/\($0)") }.filter {
        $0.hasPrefix("socket:")
      })
  }

  static func isolated(zygote: Bool = true) -> ExecutionMode {
    guard case .isolated(var s) = RuntimeHarness.isolated(maxRestarts: 2, backoff: 0.05) else {
      return RuntimeHarness.isolated()
    }
    s.zygote = zygote
    return .isolated(s)
  }

  @Test func workersAreForkedByTheZygoteConfinedAndTheHostsOwnChildren() throws {
    let h = RuntimeHarness()
    try IsolationTests.fixture("com.test.one", "one_entry").install(in: h.dir)
    try IsolationTests.fixture("com.test.two", "two_entry").install(in: h.dir)
    let m = try h.start(mode: Self.isolated())
    defer { m.stopAll() }
    let zygote = try #require(m.workers?.source.zygotePID, "no zygote runs")
    #expect(Self.commandLine(zygote).last == "--zygote")
    #expect(Self.status(zygote)["PPid"] == String(getpid()))
    #expect(Self.status(zygote)["Threads"] == "1")
    let control = Self.sockets(zygote)
    #expect(!control.isEmpty)
    var workers: Set<Int32> = []
    for id in ["com.test.one", "com.test.two"] {
      #expect(h.state(id) == .started)
      let pid = try #require(m.workerPID(id))
      workers.insert(pid)
      // `ps` says what it is; it is the host's child, so the host waits for it and signals it.
      #expect(Self.commandLine(pid).last == "--worker")
      let s = Self.status(pid)
      #expect(s["PPid"] == String(getpid()))
      #expect(s["CapEff"] == "0000000000000000")
      #expect(s["NoNewPrivs"] == "1")
      #expect(s["Seccomp"] == "2")
      // A session of its own: autogroup's unit, where no cpu cgroup holds it.
      #expect(getsid(pid) == pid, "worker \(id) is in session \(getsid(pid))")
      // Nothing of the zygote's: not its control socket.
      #expect(Self.sockets(pid).isDisjoint(with: control), "worker \(id) holds the zygote's control socket")
    }
    #expect(workers.count == 2 && !workers.contains(zygote))
  }

  @Test func withTheZygoteOffWorkersAreSpawned() throws {
    let h = RuntimeHarness()
    try IsolationTests.fixture("com.test.spawned", "spawned_entry").install(in: h.dir)
    let m = try h.start(mode: Self.isolated(zygote: false))
    defer { m.stopAll() }
    #expect(h.state("com.test.spawned") == .started)
    #expect(m.workers?.source.zygotePID == nil)
    #expect(m.workers?.source.zygoteUnavailable == "turned off")
    let pid = try #require(m.workerPID("com.test.spawned"))
    #expect(Self.commandLine(pid).last == "--await-config")
    #expect(getsid(pid) == pid, "the spawned worker is in session \(getsid(pid))")
  }

  @Test func aZygoteKilledIsReplacedAndTheCrashedModuleStillRestarts() throws {
    let h = RuntimeHarness()
    // Ends its worker when the test creates SANDBOX/exit (taking the file with it), so the
    // crash comes after the zygote is gone and the restart stays up, whatever the load: a fixed
    // 300 ms could end before the kill, or the restart before supervision saw it started.
    try IsolationTests.fixture(
      "com.test.brief", "brief_entry",
      start: """
        snprintf(g_cue, sizeof g_cue, "%s/exit", host->sandbox_path);
        pthread_t t; pthread_create(&t, NULL, later, NULL); pthread_detach(t); return FORSETTI_OK;
        """,
      prelude: """
        static char g_cue[700];
        static void *later(void *a) {
          (void)a;
          for (;;) { if (unlink(g_cue) == 0) _exit(3); usleep(10000); }
          return NULL;
        }
        """
    ).install(in: h.dir)
    let m = try h.start(mode: Self.isolated())
    defer { m.stopAll() }
    let first = try #require(m.workerPID("com.test.brief"))
    let zygote = try #require(m.workers?.source.zygotePID)
    kill(zygote, SIGKILL)
    #expect(
      FileManager.default.createFile(atPath: h.dir.url("state/sandboxes/com.test.brief/exit"), contents: nil))
    // Crashed, restarted in a new worker, forked by a new zygote.
    #expect(
      h.supervise(timeout: 30) {
        h.state("com.test.brief") == .started && m.workerPID("com.test.brief").map { $0 != first } == true
      })
    let second = try #require(m.workerPID("com.test.brief"))
    #expect(Self.commandLine(second).last == "--worker")
    let replacement = try #require(m.workers?.source.zygotePID)
    #expect(replacement != zygote)
    #expect(m.workers?.source.zygoteUnavailable == nil)
  }

  /// Each zygote lost is replaced, saying so; the third is not, and from then on workers are
  /// spawned, which the log says once. Every restart still starts its module.
  @Test func aZygoteLostThreeTimesGivesWayToSpawnedWorkersAndTheLogSaysSo() throws {
    let h = RuntimeHarness()
    try IsolationTests.fixture("com.test.steady", "steady_entry").install(in: h.dir)
    let m = try h.start(mode: RuntimeHarness.isolated(maxRestarts: 10, backoff: 0.05))
    defer { m.stopAll() }
    var lost: [Int32] = []
    for round in 1...WorkerSource.zygoteRestarts {
      let zygote = try #require(m.workers?.source.zygotePID, "round \(round): no zygote")
      let worker = try #require(m.workerPID("com.test.steady"))
      lost.append(zygote)
      kill(zygote, SIGKILL)
      // The module's next worker is asked of the dead zygote.
      kill(worker, SIGKILL)
      #expect(
        h.supervise(timeout: 60) {
          h.state("com.test.steady") == .started
            && m.workerPID("com.test.steady").map { $0 != worker } == true
        }, "round \(round): \(h.lines(nil))")
    }
    let said = h.lines(nil).filter { $0.hasPrefix("zygote pid ") }
    #expect(said.count == lost.count, "\(said)")
    for (i, zygote) in lost.enumerated() {
      let line = said.first { $0.hasPrefix("zygote pid \(zygote) had ended: ") } ?? ""
      if i < lost.count - 1 {
        #expect(
          line.hasPrefix("zygote pid \(zygote) had ended: replaced by zygote pid \(lost[i + 1])"), "\(said)")
      } else {
        #expect(
          line.hasSuffix("not replaced, 3 zygotes were lost; workers are spawned from now on (posix_spawn)"),
          "\(said)")
      }
    }
    #expect(m.workers?.source.zygotePID == nil)
    #expect(m.workers?.source.zygoteUnavailable?.contains("(3 times)") == true)
    let spawned = try #require(m.workerPID("com.test.steady"))
    #expect(Self.commandLine(spawned).last == "--await-config")
  }

  /// A hostile module looks for any process it may signal — the zygote that forked it, its
  /// sibling workers, the host — by trying every pid: it finds only itself, and the zygote
  /// goes on forking.
  @Test func aWorkerCanSignalNoProcessButItselfNotEvenTheZygote() throws {
    let h = RuntimeHarness()
    try IsolationTests.fixture("com.test.calm", "calm_entry").install(in: h.dir)
    try IsolationTests.fixture(
      "com.test.seeker", "seeker_entry",
      start: """
        int max = 4194304, found = 0, self_found = 0;
        for (int pid = 1; pid <= max; pid++) {
          if (kill(pid, 0) == 0) { found++; if (pid == getpid()) self_found = 1; }
          if (pid > 70000 && pid > getpid() + 70000) break;
        }
        char line[96]; snprintf(line, sizeof line, "signallable: %d, itself: %d", found, self_found);
        fixture_log(line);
        return FORSETTI_OK;
        """
    ).install(in: h.dir)
    let m = try h.start(mode: Self.isolated())
    defer { m.stopAll() }
    let zygote = try #require(m.workers?.source.zygotePID)
    #expect(h.lines("com.test.seeker").contains("signallable: 1, itself: 1"), "\(h.lines("com.test.seeker"))")
    #expect(kill(zygote, 0) == 0, "the zygote is gone")
    #expect(h.state("com.test.calm") == .started)
    // It still forks: a restart of the calm module gets a new worker from the same zygote.
    let before = try #require(m.workerPID("com.test.calm"))
    kill(before, SIGKILL)
    #expect(
      h.supervise(timeout: 30) {
        h.state("com.test.calm") == .started && m.workerPID("com.test.calm").map { $0 != before } == true
      })
    #expect(m.workers?.source.zygotePID == zygote)
  }

  /// A forked worker's locks work under contention: nine threads, the worker's main thread
  /// among them, add and remove event handlers, contending for the worker's handler table and
  /// its call ring. (The zygote forks from a thread that never ran Swift so that no lock starts
  /// with another thread's cached ID; a zygote built to fork from its Swift main thread still
  /// passed this test, so it guards the locks, not that choice: zygote.c gives the reason.)
  @Test func threadsOfAForkedWorkerContendWithoutDeadlock() throws {
    let h = RuntimeHarness()
    try IsolationTests.fixture(
      "com.test.contend", "contend_entry",
      start: """
        pthread_t t[8];
        for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, hammer, NULL);
        hammer(NULL);
        for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
        char line[64]; snprintf(line, sizeof line, "calls answered: %d", __atomic_load_n(&answered, __ATOMIC_SEQ_CST));
        fixture_log(line);
        return FORSETTI_OK;
        """,
      prelude: """
        static int answered;
        static void on_event(void *c, const char *s, const char *t, const void *p, size_t n) {
          (void)c; (void)s; (void)t; (void)p; (void)n;
        }
        static void *hammer(void *a) {
          (void)a;
          const forsetti_events *e = g_host->resolve(FORSETTI_SERVICE_EVENTS);
          for (int i = 0; i < 2000; i++) {
            // Each pair adds and removes a handler in the worker's table, under its lock.
            int64_t id = e ? e->subscribe("zygote.contention", on_event, NULL) : -1;
            if (id > 0 && e->unsubscribe(id) == FORSETTI_OK) __atomic_add_fetch(&answered, 1, __ATOMIC_SEQ_CST);
            if (i % 100 == 0) g_host->log(FORSETTI_LOG_DEBUG, "hammering");
          }
          return NULL;
        }
        """
    ).install(in: h.dir)
    let m = try h.start(mode: RuntimeHarness.isolated(startTimeout: 60))
    defer { m.stopAll() }
    #expect(
      h.state("com.test.contend") == .started, "\(String(describing: h.record("com.test.contend")?.trace))")
    #expect(h.lines("com.test.contend").contains("calls answered: 18000"), "\(h.lines("com.test.contend"))")
  }
}
