import CForsetti
import ForsettiCore
import ForsettiRuntime
import ForsettiTestSupport
import Foundation
import Synchronization
import Testing

/// Modules that forge worker protocol frames on the worker's socket (descriptor 3), in every
/// state a module's code can run in: a frame valid there is handled like the worker's own, any
/// other ends that module with `protocolViolation` at once, the host never waits on it, and a
/// healthy module beside it keeps being served.
// One test at a time: each starts tens of workers at once (and compiles as many fixtures), and
// suites beside it (a 512 MiB memset under a start deadline) share the machine.
@Suite(.onTestThreads, .serialized, .timeLimit(.minutes(5))) struct ProtocolViolationTests {
  /// Where the forging module's code runs when it writes its frame.
  enum Moment: String, CaseIterable, Sendable {
    /// A constructor, run at dlopen: the worker is confined and waits to report `loaded`.
    case load
    /// Inside `start`.
    case start
    /// A thread of a started module.
    case running
    /// Inside `stop`.
    case stop
    /// Inside `save_state`, asked for by a restart that carries state (hot reload's path).
    case saveState
  }

  /// Every kind: host → worker 1–7, worker → host 100–112, `startConfirmed` (114, under a
  /// nonce the module cannot know), and one that does not exist.
  static let kinds: [UInt32] = Array(1...7) + Array(100...112) + [114, 4242]

  /// The frame's values, as the real sender would write them, so that only the kind and the
  /// moment can make it wrong: `startResult` carries FORSETTI_OK, `log` a line, …
  static let forge = """
    #include <stdint.h>
    #include <pthread.h>
    #include <sys/socket.h>
    static unsigned char frame[256];
    static size_t frame_len;
    static void put(const void *p, size_t n) { memcpy(frame + frame_len, p, n); frame_len += n; }
    static void put_int(int64_t v) { unsigned char t = 1; put(&t, 1); put(&v, 8); }
    static void put_str(const char *s) { unsigned char t = 2; uint32_t n = (uint32_t)strlen(s); put(&t, 1); put(&n, 4); put(s, n); }
    static void forge(void) {
      uint32_t kind = FORGED_KIND; uint64_t id = 0;
      frame_len = 0; put(&kind, 4); put(&id, 8);
      switch (kind) {
        case 103: put_int(0); break;
        case 105: put_int(1); put_str("forged log line"); break;
        case 106: put_str("forged.metric"); put_str(""); break;
        case 112: put_str(""); break;
        default: put_str("x"); break;
      }
      send(3, frame, frame_len, MSG_NOSIGNAL);
    }
    """

  static func forger(_ kind: UInt32, at moment: Moment) -> ModuleFixture {
    var f = ModuleFixture(moduleID: "com.test.forge\(kind)", entryPoint: "forge\(kind)_entry")
    f.prelude = "#define FORGED_KIND \(kind)u\n" + forge
    switch moment {
    case .load:
      f.prelude += "\n__attribute__((constructor)) static void at_load(void) { forge(); }\n"
    case .start:
      f.start = "forge(); usleep(100000); return FORSETTI_OK;"
    case .running:
      // Forges once the test creates SANDBOX/go (after it saw the module started), not after a
      // fixed 50 ms that a loaded machine's start of the other modules could outlast.
      f.prelude += """

        static char g_cue[700];
        static void *later(void *a) {
          (void)a;
          for (int i = 0; i < 12000 && access(g_cue, F_OK) != 0; i++) usleep(10000);
          forge(); return NULL;
        }

        """
      f.start = """
        snprintf(g_cue, sizeof g_cue, "%s/go", g_host->sandbox_path);
        pthread_t t; pthread_create(&t, NULL, later, NULL); pthread_detach(t); return FORSETTI_OK;
        """
    case .stop:
      f.stop = "forge(); usleep(50000);"
    case .saveState:
      f.prelude += """

        static forsetti_status save(void *self, forsetti_state_writer write, void *ctx) {
          (void)self; forge(); usleep(50000); return write(ctx, "s", 1);
        }
        """
      f.tableExtra = ".save_state = save,"
    }
    return f
  }

  /// A module that keeps calling the host from a thread and logs each answer: its log lines
  /// going on (with status 0) show the host still serves it. Its ID sorts first, so it starts
  /// first and stops last.
  static var healthy: ModuleFixture {
    var f = ModuleFixture(moduleID: "com.test.aaahealthy", entryPoint: "healthy_entry")
    f.prelude = """
      #include <pthread.h>
      static volatile int ticks, stopping;
      static void *ticker(void *a) {
        (void)a;
        const forsetti_events *e = g_host->resolve(FORSETTI_SERVICE_EVENTS);
        while (!stopping) {
          char line[64]; snprintf(line, sizeof line, "tick %d: %d", ++ticks, e->publish("test.tick", "", 0));
          fixture_log(line); usleep(20000);
        }
        return NULL;
      }
      """
    f.start = "pthread_t t; pthread_create(&t, NULL, ticker, NULL); pthread_detach(t); return FORSETTI_OK;"
    f.stop = "stopping = 1; fixture_log(\"healthy stop\");"
    return f
  }

  /// Isolation with a generous start deadline (nothing here should need it: a violation is
  /// acted on at once, and the machine may be busy) and a short stop deadline.
  static var mode: ExecutionMode {
    guard case .isolated(var s) = RuntimeHarness.isolated() else { return RuntimeHarness.isolated() }
    s.startTimeout = 10
    s.stopTimeout = 1
    return .isolated(s)
  }

  /// Installs `fixtures` as `ModuleFixture.install` does, but runs four compilers at a time:
  /// most of this suite's time is the C compiler.
  static func install(_ fixtures: [ModuleFixture], in dir: TemporaryDirectory) throws {
    var compilers: [(Process, Pipe, String)] = []
    func waitForCompilers() throws {
      for (cc, err, name) in compilers {
        let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        cc.waitUntilExit()
        try #require(cc.terminationStatus == 0, "\(name): \(message)")
      }
      compilers.removeAll()
    }
    for f in fixtures {
      if compilers.count == 4 { try waitForCompilers() }
      try dir.write("manifests/\(f.entryPoint).json", f.manifest())
      let src = try dir.write("src/\(f.entryPoint).c", f.source)
      try FileManager.default.createDirectory(atPath: dir.url("plugins"), withIntermediateDirectories: true)
      let cc = Process()
      cc.executableURL = URL(fileURLWithPath: "/usr/bin/env")
      cc.arguments = [
        "cc", "-shared", "-fPIC", "-Wall", "-I", ModuleFixture.includeDirectory, "-o",
        dir.url("plugins/\(f.entryPoint).so"), src,
      ]
      let err = Pipe()
      cc.standardError = err
      try cc.run()
      compilers.append((cc, err, f.entryPoint))
    }
    try waitForCompilers()
  }

  /// Waits until the healthy module logs a successful host call after `mark` lines.
  static func healthyServed(_ h: RuntimeHarness, after mark: Int) -> Bool {
    let end = Date().addingTimeInterval(30)
    while Date() < end {
      if h.lines("com.test.aaahealthy").dropFirst(mark).contains(where: {
        $0.hasPrefix("tick") && $0.hasSuffix(": 0")
      }) {
        return true
      }
      usleep(10_000)
    }
    return false
  }

  static func id(_ kind: UInt32) -> String { "com.test.forge\(kind)" }

  /// "stopped (104)", as the violation's detail names the kind.
  static func kindName(_ kind: UInt32) -> String {
    let names: [UInt32: String] = [
      1: "start", 2: "stop", 3: "deliverEvent", 4: "deliverMessage", 5: "response", 6: "saveState",
      7: "configure", 100: "confined", 101: "loaded", 102: "loadFailed", 103: "startResult", 104: "stopped",
      105: "log", 106: "telemetry", 107: "publish", 108: "subscribe", 109: "unsubscribe", 110: "send",
      111: "setHandler", 112: "stateSaved", 114: "startConfirmed",
    ]
    return names[kind].map { "\($0) (\(kind))" } ?? "kind \(kind) (unknown)"
  }

  /// Log and telemetry may come whenever module code runs.
  static let service: Set<UInt32> = [105, 106]

  @Test(arguments: Moment.allCases) func forgedFramesOfEveryKind(at moment: Moment) throws {
    let h = RuntimeHarness()
    try Self.install(Self.kinds.map { Self.forger($0, at: moment) } + [Self.healthy], in: h.dir)
    let m = try h.start(mode: Self.mode)
    #expect(h.state("com.test.aaahealthy") == .started)
    let mark = h.lines("com.test.aaahealthy").count

    switch moment {
    case .load:
      for kind in Self.kinds {
        let r = h.record(Self.id(kind))
        switch kind {
        case _ where Self.service.contains(kind):
          #expect(r?.state == .started, "\(kind): \(String(describing: r?.trace.firstFailure))")
        case 102:
          // The worker's own word for a failed load, believed: the module is not started.
          #expect(r?.state == .failed(.loadFailed), "\(kind)")
        case 101:
          #expect(r?.state == .failed(.loadFailed), "\(kind)")
          #expect(r?.trace.firstFailure?.detail.contains("cannot read") == true, "\(kind)")
        default:
          #expect(r?.state == .failed(.protocolViolation), "\(kind): \(String(describing: r?.state))")
          #expect(r?.trace.firstFailure?.step == .load, "\(kind)")
          let detail = r?.trace.firstFailure?.detail ?? ""
          #expect(detail.contains(Self.kindName(kind)) && detail.contains("while loading"), "\(detail)")
        }
      }
      #expect(h.lines(Self.id(105)).contains("forged log line"))
    case .start:
      for kind in Self.kinds {
        let r = h.record(Self.id(kind))
        if Self.service.contains(kind) {
          #expect(r?.state == .started, "\(kind): \(String(describing: r?.trace.firstFailure))")
        } else {
          #expect(r?.state == .failed(.protocolViolation), "\(kind): \(String(describing: r?.state))")
          #expect(r?.trace.firstFailure?.step == .start, "\(kind)")
          let detail = r?.trace.firstFailure?.detail ?? ""
          // A forged `startResult` is not the answer until the main thread confirms it: the real
          // one that follows, still in start, is the violation.
          let phase = kind == 103 ? "while start returned" : "while starting"
          let phases = kind == 103 ? [phase, "while confirming start"] : [phase]
          #expect(
            detail.contains(Self.kindName(kind)) && phases.contains { detail.contains($0) }, "\(detail)")
        }
      }
    case .running:
      let hostile = Self.kinds.filter { !Self.service.contains($0) }
      #expect(hostile.allSatisfy { h.state(Self.id($0)) == .started })
      for kind in Self.kinds {
        _ = FileManager.default.createFile(
          atPath: h.dir.url("state/sandboxes/\(Self.id(kind))/go"), contents: nil)
      }
      #expect(h.supervise { hostile.allSatisfy { h.state(Self.id($0)) == .failed(.protocolViolation) } })
      for kind in hostile {
        #expect(
          h.lines(Self.id(kind)).contains {
            $0.hasPrefix("protocolViolation while running") && $0.contains(Self.kindName(kind))
          }, "\(kind): \(h.lines(Self.id(kind)))")
      }
      #expect(h.waitForLine(Self.id(105)) { $0 == "forged log line" } != nil)
      #expect(Self.service.allSatisfy { h.state(Self.id($0)) == .started })
    case .stop:
      m.stopAll()
      for kind in Self.kinds {
        let r = h.record(Self.id(kind))
        if Self.service.contains(kind) || kind == 104 {
          #expect(r?.state == .stopped, "\(kind): \(String(describing: r?.state))")
        } else {
          #expect(r?.state == .failed(.protocolViolation), "\(kind): \(String(describing: r?.state))")
          #expect(
            h.lines(Self.id(kind)).contains {
              $0.hasPrefix("protocolViolation during stop") && $0.contains(Self.kindName(kind))
            }, "\(kind): \(h.lines(Self.id(kind)))")
        }
      }
      // Stopped last, after every forger: still served, and stopped cleanly.
      #expect(h.lines("com.test.aaahealthy").contains("healthy stop"))
      #expect(h.state("com.test.aaahealthy") == .stopped)
      return
    case .saveState:
      for kind in Self.kinds {
        // A restart that carries state asks the running instance for it first.
        m.regrant(Self.id(kind), [])
        let lines = h.lines(Self.id(kind))
        let violation = lines.first { $0.hasPrefix("protocolViolation") }
        if Self.service.contains(kind) {
          #expect(violation == nil, "\(kind): \(lines)")
        } else {
          // `stateSaved` too: the host asked under another request ID than the forged one.
          #expect(
            violation?.contains(Self.kindName(kind)) == true
              && violation?.contains("while saving state") == true,
            "\(kind): \(lines)")
        }
        // The new instance runs either way.
        #expect(h.state(Self.id(kind)) == .started, "\(kind)")
      }
    }
    #expect(Self.healthyServed(h, after: mark), "\(h.lines("com.test.aaahealthy").suffix(3))")
    #expect(h.state("com.test.aaahealthy") == .started)
    m.stopAll()
    #expect(h.state("com.test.aaahealthy") == .stopped)
  }

  /// Bytes that are not a frame, sent during start: each ends only its sender.
  @Test func malformedBytesAreViolations() throws {
    let h = RuntimeHarness()
    let cases: [(String, String)] = [
      // Shorter than a frame's header.
      ("truncated", "unsigned char b[8] = {105, 0, 0, 0, 0, 0, 0, 0}; send(3, b, sizeof b, 0);"),
      // A log frame whose first value has tag 9.
      (
        "badtag",
        "unsigned char b[14] = {105, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0}; send(3, b, sizeof b, 0);"
      ),
      // A string value claiming 1000 bytes in a 20-byte frame.
      (
        "shortvalue",
        "unsigned char b[20] = {105, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0xe8, 3, 0, 0, 'a', 'b', 'c'}; send(3, b, sizeof b, 0);"
      ),
      // Larger than any frame may be (128 KiB).
      (
        "oversized",
        "size_t n = 150000; unsigned char *b = calloc(1, n); b[0] = 105; ssize_t r = send(3, b, n, 0); free(b); if (r < 0) fixture_log(\"oversized send refused\");"
      ),
    ]
    var fixtures = cases.map { name, body in
      var f = ModuleFixture(moduleID: "com.test.bad\(name)", entryPoint: "bad\(name)_entry")
      f.prelude = "#include <sys/socket.h>\n"
      f.start = body + " usleep(100000); return FORSETTI_OK;"
      return f
    }
    fixtures.append(Self.healthy)
    try Self.install(fixtures, in: h.dir)
    let m = try h.start(mode: Self.mode)
    let mark = h.lines("com.test.aaahealthy").count
    for (name, _) in cases {
      let r = h.record("com.test.bad\(name)")
      #expect(
        r?.state == .failed(.protocolViolation), "\(name): \(String(describing: r?.trace.firstFailure))")
      #expect(r?.trace.firstFailure?.detail.contains("malformed frame") == true, "\(name)")
    }
    #expect(h.record("com.test.badoversized")?.trace.firstFailure?.detail.contains("150000 bytes") == true)
    #expect(h.record("com.test.badbadtag")?.trace.firstFailure?.detail.contains("bad value tag 9") == true)
    #expect(Self.healthyServed(h, after: mark))
    m.stopAll()
    #expect(h.state("com.test.aaahealthy") == .stopped)
  }

  /// The attack as first found, against the real `forsetti-host run --for 3`: a module writes
  /// `loadFailed`, `stopped` or `stateSaved` during `start` and then blocks for good. Each is
  /// killed for it at once; the module after them starts; the host stops on time by itself.
  @Test(arguments: HostileHost.Identity.allCases)
  func theOriginalAttackNoLongerHoldsTheHost(as identity: HostileHost.Identity) throws {
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    for (kind, name) in [(102, "loadfailed"), (104, "stopped"), (112, "statesaved")] {
      var f = ModuleFixture(moduleID: "com.test.attack\(name)", entryPoint: "attack_\(name)_entry")
      f.prelude = "#define FORGED_KIND \(kind)u\n" + Self.forge
      f.start = "forge(); for (;;) pause(); return FORSETTI_OK;"
      try h.install(f)
    }
    var later = ModuleFixture(moduleID: "com.test.zlater", entryPoint: "zlater_entry")
    later.start = "fixture_log(\"later started\"); return FORSETTI_OK;"
    try h.install(later)

    // Before the fix this host never exited; the harness's watchdog ends it rather than the
    // test hanging.
    let run = try h.run(for: 3)
    #expect(!run.killedByWatchdog, "the host did not stop by itself:\n\(run.output)")
    #expect(run.status == 1, "\(run.output)")
    #expect(run.lines("com.test.zlater").contains("later started"), "\(run.output)")
    for (kind, name) in [
      ("loadFailed (102)", "loadfailed"), ("stopped (104)", "stopped"), ("stateSaved (112)", "statesaved"),
    ] {
      #expect(
        run.output.contains(
          "[module=com.test.attack\(name)] protocolViolation at start: the worker sent \(kind)"),
        "\(run.output)")
    }
    #expect(run.output.contains("--for 3.0s elapsed"), "\(run.output)")
  }

  /// SIGTERM while a module hangs in `start`: the host stops once that start's deadline has
  /// passed (not never), and the module beside it started meanwhile.
  @Test func sigtermWhileAModuleHangsInStartTakesEffect() throws {
    let dir = TemporaryDirectory("sigterm")
    var spin = ModuleFixture(moduleID: "com.test.aspin", entryPoint: "aspin_entry")
    spin.start = "for (;;) {} return FORSETTI_OK;"
    var later = ModuleFixture(moduleID: "com.test.zlater", entryPoint: "zlater_entry")
    later.start = "fixture_log(\"later started\"); return FORSETTI_OK;"
    try Self.install([spin, later], in: dir)

    let host = Process()
    host.executableURL = URL(fileURLWithPath: HostBinary.path)
    host.arguments = [
      "run", "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state",
      dir.url("state"),
      "--approve-all", "--start-timeout", "2",
    ]
    let out = Pipe()
    host.standardOutput = out
    // Warnings and errors (the spinner's startTimedOut) come on standard error: read both.
    host.standardError = out
    host.standardInput = FileHandle.nullDevice
    let seen = Output()
    out.fileHandleForReading.readabilityHandler = { handle in
      let chunk = String(decoding: handle.availableData, as: UTF8.self)
      let all = seen.text.withLock { s in
        s += chunk
        return s
      }
      // The spinner is still in start when its neighbour logs from its own.
      if all.contains("later started"), !seen.signalled.exchange(true, ordering: .relaxed) {
        kill(host.processIdentifier, SIGTERM)
      }
    }
    try host.run()
    let watchdog = DispatchWorkItem { [pid = host.processIdentifier] in kill(pid, SIGKILL) }
    DispatchQueue.global().asyncAfter(deadline: .now() + 30, execute: watchdog)
    host.waitUntilExit()
    watchdog.cancel()
    out.fileHandleForReading.readabilityHandler = nil
    let rest = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    let output = seen.text.withLock { $0 } + rest
    let signalled = seen.signalled.load(ordering: .relaxed)
    #expect(signalled, "\(output)")
    #expect(host.terminationReason == .exit, "killed by the watchdog:\n\(output)")
    #expect(output.contains("stopping all modules (SIGTERM)"), "\(output)")
    #expect(output.contains("[module=com.test.aspin] startTimedOut at start"), "\(output)")
    #expect(output.contains("[module=com.test.zlater] later started"), "\(output)")
  }
}

/// What the host printed so far, and whether it was sent its SIGTERM (shared with the pipe's
/// reader).
private final class Output: Sendable {
  let text = Mutex("")
  let signalled = Atomic<Bool>(false)
}
