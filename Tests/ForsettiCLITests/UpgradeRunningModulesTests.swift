import ForsettiTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

/// `forsetti-host upgrade` with modules running (issue 43): the host, run from a copy of the
/// executable, the copy replaced as a package upgrade replaces it, becomes the new file in the
/// same process and keeps serving the same workers — no module stopped or started, the same
/// worker pids, no tick of a module logging and publishing every 100 ms from its own thread
/// lost, no event to its listener lost, and a consumer calling a provider in a loop answered
/// OK all along. As root and as uid 65534.
@Suite(.onTestThreads, .serialized) struct UpgradeRunningModulesTests {
  typealias F = RoleLoadFixtures

  /// Logs `tick N` and publishes event `com.test.tick` with N, every 100 ms, from its own thread.
  static var ticker: ModuleFixture {
    var f = ModuleFixture(moduleID: "com.test.up.ticker", entryPoint: "up_ticker_entry")
    f.prelude = """
      #include <pthread.h>
      static volatile int g_stop;
      static pthread_t g_thread;
      static const forsetti_events *g_events;
      static void *tick(void *a) {
        (void)a; char line[64];
        for (int i = 0; !g_stop; i++) {
          snprintf(line, sizeof line, "tick %d", i);
          g_host->log(FORSETTI_LOG_INFO, line);
          snprintf(line, sizeof line, "%d", i);
          g_events->publish("com.test.tick", line, strlen(line));
          usleep(100000);
        }
        return NULL;
      }
      """
    f.start = """
      g_events = host->resolve(FORSETTI_SERVICE_EVENTS);
      if (!g_events) return FORSETTI_ERR_START_FAILED;
      pthread_create(&g_thread, NULL, tick, NULL);
      return FORSETTI_OK;
      """
    f.stop = "g_stop = 1; pthread_join(g_thread, NULL);"
    return f
  }

  /// Subscribes to `com.test.tick` and logs `heard N` for each event.
  static var listener: ModuleFixture {
    var f = ModuleFixture(moduleID: "com.test.up.listener", entryPoint: "up_listener_entry")
    f.prelude = """
      static const forsetti_events *g_events;
      static void heard(void *ctx, const char *source, const char *type, const void *payload, size_t len) {
        (void)ctx; (void)source; (void)type;
        char line[64]; int n = len < 20 ? (int)len : 20;
        snprintf(line, sizeof line, "heard %.*s", n, (const char *)payload);
        g_host->log(FORSETTI_LOG_INFO, line);
      }
      """
    f.start = """
      g_events = host->resolve(FORSETTI_SERVICE_EVENTS);
      if (!g_events) return FORSETTI_ERR_START_FAILED;
      return g_events->subscribe("com.test.tick", heard, NULL) > 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    return f
  }

  /// Publishes `com.test.fast` with a sequence number every 2 ms, logging `published N` each
  /// second (one line a second: the log's rate limit drops nothing).
  static var fastPublisher: ModuleFixture {
    var f = ModuleFixture(moduleID: "com.test.up.aa.publisher", entryPoint: "up_fast_pub_entry")
    f.prelude = """
      #include <pthread.h>
      static volatile int g_stop;
      static pthread_t g_thread;
      static const forsetti_events *g_events;
      static void *run(void *a) {
        (void)a; char n[32]; char line[64];
        for (long i = 0; !g_stop; i++) {
          snprintf(n, sizeof n, "%ld", i);
          g_events->publish("com.test.fast", n, strlen(n));
          if (i % 500 == 0) { snprintf(line, sizeof line, "published %ld", i); g_host->log(FORSETTI_LOG_INFO, line); }
          usleep(2000);
        }
        return NULL;
      }
      """
    f.start = """
      g_events = host->resolve(FORSETTI_SERVICE_EVENTS);
      if (!g_events) return FORSETTI_ERR_START_FAILED;
      pthread_create(&g_thread, NULL, run, NULL);
      return FORSETTI_OK;
      """
    f.stop = "g_stop = 1; pthread_join(g_thread, NULL);"
    return f
  }

  /// Subscribes to `com.test.fast`; logs `gap A -> B` for a number missed, `heard N` each 500th.
  static var fastListener: ModuleFixture {
    var f = ModuleFixture(moduleID: "com.test.up.zz.listener", entryPoint: "up_fast_listen_entry")
    f.prelude = """
      #include <stdlib.h>
      static const forsetti_events *g_events;
      static long g_last = -1;
      static void heard(void *ctx, const char *source, const char *type, const void *payload, size_t len) {
        (void)ctx; (void)source; (void)type;
        char b[32]; size_t k = len < sizeof b - 1 ? len : sizeof b - 1;
        memcpy(b, payload, k); b[k] = 0;
        long n = atol(b); char line[96];
        if (g_last >= 0 && n != g_last + 1) { snprintf(line, sizeof line, "gap %ld -> %ld", g_last, n); g_host->log(FORSETTI_LOG_INFO, line); }
        if (n % 500 == 0) { snprintf(line, sizeof line, "heard %ld", n); g_host->log(FORSETTI_LOG_INFO, line); }
        g_last = n;
      }
      """
    f.start = """
      g_events = host->resolve(FORSETTI_SERVICE_EVENTS);
      if (!g_events) return FORSETTI_ERR_START_FAILED;
      return g_events->subscribe("com.test.fast", heard, NULL) > 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    return f
  }

  /// The numbers after `prefix` in `lines`, in order.
  static func numbers(_ lines: [String], _ prefix: String) -> [Int] {
    lines.compactMap { $0.hasPrefix(prefix) ? Int($0.dropFirst(prefix.count)) : nil }
  }

  /// Numbers that should follow one another and do not (a lost tick, a lost event).
  static func gaps(_ numbers: [Int]) -> [String] {
    zip(numbers, numbers.dropFirst()).compactMap { $1 == $0 + 1 ? nil : "\($0) → \($1)" }
  }

  @Test(arguments: HostileHost.Identity.allCases)
  func runningModulesKeepTheirWorkersAndLoseNothingAcrossAnUpgrade(as identity: HostileHost.Identity) throws {
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    let exe = try UpgradeTests.installCopy(in: h)
    try h.install(Self.ticker)
    try h.install(Self.listener)
    let provider = "com.test.up.db"
    let consumer = "com.test.up.client"
    try F.slowProvider(moduleID: provider, entryPoint: "up_db_entry", millis: 0).install(
      in: h.dir, capabilities: ["shared_database"], manifestExtra: F.holds("shared_database"),
      ccFlags: ["-D_GNU_SOURCE"])
    try F.loadConsumer(
      moduleID: consumer, entryPoint: "up_client_entry", threads: 1, method: "ping", pauseMillis: 20,
      reportEveryMillis: 300
    ).install(
      in: h.dir, capabilities: ["shared_database"], manifestExtra: F.consumesSharedDatabase,
      ccFlags: ["-D_GNU_SOURCE"])
    let state = h.dir.url("state")
    let log = state + "/logs/host.log"
    @Sendable func logged() -> String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
    /// Waits until the host's log holds `text`, a minute at most (a safety net).
    @Sendable func awaitLog(_ text: String) -> Bool {
      let end = Date().addingTimeInterval(60)
      while !logged().contains(text) {
        guard Date() < end else { return false }
        usleep(20_000)
      }
      return true
    }
    let seen = Mutex<[String: String]>([:])
    let run = try h.run(
      for: 150, executable: exe,
      ready: { FileManager.default.fileExists(atPath: state + "/control.sock") },
      observe: { pid in
        var facts: [String: String] = ["pid": String(pid)]
        defer {
          seen.withLock { $0 = facts }
          kill(pid, SIGTERM)
        }
        UpgradeTests.awaitAnswer(h, state: state)
        guard awaitLog("heard 5"), awaitLog("counts ok=") else {
          facts["error"] = "the modules did not get going"
          return [:]
        }
        let before = UpgradeTests.liveWorkers(of: pid)
        facts["workers before"] = before.map(String.init).joined(separator: ",")
        do {
          // A broken new file first: refused, every worker as it was.
          let script = h.dir.url("broken.sh")
          try "#!/bin/sh\necho this is not a host >&2\nexit 1\n".write(
            toFile: script, atomically: false, encoding: .utf8)
          chmod(script, 0o755)
          try UpgradeTests.replace(exe, with: script)
          let refused = try h.cli(["upgrade", "--state", state])
          facts["refused"] = "\(refused.status): \(refused.stdout + refused.stderr)"
          facts["workers after refusal"] = UpgradeTests.liveWorkers(of: pid).map(String.init).joined(
            separator: ",")
          try UpgradeTests.replace(exe, with: HostBinary.path)
          let asker = UpgradeTests.StatusAsker()
          asker.start(h, state: state)
          let upgrade = try h.cli(["upgrade", "--state", state])
          facts["upgrade status"] = String(upgrade.status)
          facts["upgrade out"] = upgrade.stdout + upgrade.stderr
          // Twenty ticks after the upgrade, heard, and the consumer's counts reported since.
          facts["new image logged"] = String(awaitLog("upgrade: this host (pid"))
          let now =
            Self.numbers(
              logged().split(separator: "\n").compactMap { line -> String? in
                line.range(of: "[module=com.test.up.ticker] ").map { String(line[$0.upperBound...]) }
              }, "tick "
            ).last ?? 0
          facts["after"] = String(awaitLog("heard \(now + 20)"))
          asker.stop()
          facts["answered"] = String(asker.answered.load(ordering: .relaxed))
          facts["unanswered"] = asker.unanswered.withLock { $0.joined(separator: " | ") }
        } catch {
          facts["error"] = "\(error)"
        }
        facts["exe after"] = UpgradeTests.exe(pid)
        let after = UpgradeTests.liveWorkers(of: pid)
        facts["workers after"] = after.map(String.init).joined(separator: ",")
        return [:]
      })
    let f = seen.withLock { $0 }
    let pid = try #require(f["pid"])
    #expect(f["error"] == nil, "\(f)\n\(run.output.suffix(3000))")
    #expect(f["upgrade status"] == "0", "\(f)\n\(run.output.suffix(3000))")
    #expect(f["exe after"] == exe, "the host runs the new file: \(f)")
    #expect(f["new image logged"] == "true" && f["after"] == "true", "\(f)")
    // Four modules, each in the worker it had before.
    #expect(f["workers before"]?.split(separator: ",").count == 4, "\(f)")
    #expect(f["workers after"] == f["workers before"], "\(f)")
    #expect(
      f["refused"]?.hasPrefix("1: ") == true && f["refused"]?.contains("this is not a host") == true, "\(f)")
    #expect(f["workers after refusal"] == f["workers before"], "\(f)")
    #expect(f["unanswered"] == "", "\(f)")
    // Nothing stopped or started across it: one start line each, before; a kept line each, after.
    let upgradeAt = try #require(run.output.range(of: "upgrade: this host (pid \(pid)) now runs \(exe)"))
    let after = String(run.output[upgradeAt.upperBound...])
    let beforeText = String(run.output[..<upgradeAt.lowerBound])
    for id in ["com.test.up.ticker", "com.test.up.listener", provider, consumer] {
      #expect(
        after.contains(" started  kept running in worker pid ") && after.contains(id),
        "\(id)\n\(after.prefix(3000))")
      // A stop is only the final one, after SIGTERM: none between the upgrade and the last
      // counts the test waited for.
      #expect(!after.contains("started \(id)"), "\(id)\n\(after.prefix(3000))")
      #expect(beforeText.components(separatedBy: "started \(id) ").count == 2, "\(id)")
    }
    // No tick and no event lost, across the upgrade.
    let ticks = Self.numbers(run.lines("com.test.up.ticker"), "tick ")
    let heard = Self.numbers(run.lines("com.test.up.listener"), "heard ")
    #expect(ticks.first == 0 && Self.gaps(ticks).isEmpty, "\(Self.gaps(ticks))")
    #expect(heard.first == 0 && Self.gaps(heard).isEmpty, "\(Self.gaps(heard))")
    // Positive control: the numbers went on well past the upgrade.
    let tickAtUpgrade =
      Self.numbers(
        beforeText.split(separator: "\n").compactMap { line -> String? in
          line.range(of: "[module=com.test.up.ticker] ").map { String(line[$0.upperBound...]) }
        }, "tick "
      ).last ?? 0
    #expect((heard.last ?? 0) >= tickAtUpgrade + 20, "\(heard.suffix(3)) \(tickAtUpgrade)")
    // The consumer, calling all along, was answered OK before and after and nothing else.
    let counts = run.lines(consumer).filter { $0.hasPrefix("counts ") }
    let last = F.words(try #require(counts.last))
    let atUpgrade = F.words(
      try #require(
        beforeText.split(separator: "\n").last { $0.contains("[module=\(consumer)] counts ") }.map(
          String.init)))
    #expect(last["other"] == 0 && last["timeout"] == 0 && last["busy"] == 0, "\(counts.suffix(3))")
    #expect(last["ok", default: 0] > atUpgrade["ok", default: 0], "\(counts.suffix(3)) \(atUpgrade)")
  }

  /// 200 isolated modules (one library, an entry point each): upgraded with none stopped or
  /// started — every worker the same process after it — and every one then stopped cleanly by
  /// the new image (positive control: it serves them all).
  @Test(.timeLimit(.minutes(5)), arguments: HostileHost.Identity.allCases)
  func twoHundredModulesAreKeptAcrossAnUpgrade(as identity: HostileHost.Identity) throws {
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    let exe = try UpgradeTests.installCopy(in: h)
    let count = HostThreadBoundTests.count
    let src = try h.dir.write("src/threads.c", HostThreadBoundTests.source)
    let built = try ProcessRunner.run(
      "/usr/bin/env",
      [
        "cc", "-shared", "-fPIC", "-Wall", "-I", ModuleFixture.includeDirectory, "-o",
        h.dir.url("plugins/threads.so"), src,
      ])
    try #require(built.status == 0, "\(built.stderr)")
    for i in 0..<count {
      let f = ModuleFixture(moduleID: HostThreadBoundTests.id(i), entryPoint: "threads\(i)_entry")
      try h.dir.write("manifests/\(HostThreadBoundTests.id(i)).json", f.manifest())
    }
    // And a publisher and a listener, handed over first and last: every one between is adopted
    // while the publisher could already publish (it must not be served before the listener's
    // subscription is back).
    try h.install(Self.fastPublisher)
    try h.install(Self.fastListener)
    let state = h.dir.url("state")
    let seen = Mutex<[String: String]>([:])
    let run = try h.run(
      for: 240, executable: exe,
      ready: {
        let log = (try? String(contentsOfFile: state + "/logs/host.log", encoding: .utf8)) ?? ""
        return log.components(separatedBy: "] up 0").count - 1 >= count && log.contains("] heard 1000")
      },
      observe: { pid in
        var facts: [String: String] = [:]
        defer {
          seen.withLock { $0 = facts }
          kill(pid, SIGTERM)
        }
        UpgradeTests.awaitAnswer(h, state: state)
        let before = UpgradeTests.liveWorkers(of: pid)
        facts["before"] = String(before.count)
        do {
          try UpgradeTests.replace(exe, with: HostBinary.path)
          let r = try h.cli(["upgrade", "--state", state])
          facts["upgrade"] = "\(r.status): \(r.stdout + r.stderr)"
          // Two more seconds of events after it (a minute at most, a safety net).
          let log = state + "/logs/host.log"
          let heard = { () -> Int in
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            return Self.numbers(
              text.split(separator: "\n").compactMap { line -> String? in
                line.range(of: "[module=com.test.up.zz.listener] ").map { String(line[$0.upperBound...]) }
              }, "heard "
            ).last ?? 0
          }
          let target = heard() + 1000
          let end = Date().addingTimeInterval(60)
          while heard() < target && Date() < end { usleep(50_000) }
          facts["heard after"] = String(heard() >= target)
        } catch {
          facts["error"] = "\(error)"
        }
        facts["same"] = String(UpgradeTests.liveWorkers(of: pid) == before)
        return [:]
      })
    let f = seen.withLock { $0 }
    #expect(f["error"] == nil && f["upgrade"]?.hasPrefix("0: upgraded: pid ") == true, "\(f)")
    #expect(f["before"] == String(count + 2) && f["same"] == "true", "\(f)")
    let kept = run.output.components(separatedBy: " started  kept running in worker pid ").count - 1
    #expect(kept == count + 2, "\(kept) kept\n\(run.output.suffix(2000))")
    // No event lost while 202 workers were taken over, and events went on after (positive control).
    let gaps = run.lines("com.test.up.zz.listener").filter { $0.hasPrefix("gap ") }
    #expect(gaps.isEmpty && f["heard after"] == "true", "\(gaps) \(f)")
    #expect(
      run.status == 0 && run.output.contains("\(count + 2) modules: \(count + 2) ran and stopped cleanly"),
      "\(run.status)\n\(run.output.suffix(2000))")
  }

  /// The host killed (SIGKILL) while its new image is not up yet — here a new file that passes
  /// the preflight and then only sleeps — leaves no worker behind: each ends with its parent.
  @Test(.timeLimit(.minutes(3)))
  func aHostKilledMidUpgradeLeavesNoWorkerBehind() throws {
    let h = HostileHost(.current)
    let exe = try UpgradeTests.installCopy(in: h)
    try h.install(Self.ticker)
    try h.install(Self.listener)
    let state = h.dir.url("state")
    let seen = Mutex<[String: String]>([:])
    _ = try h.run(
      for: 120, executable: exe,
      ready: {
        let log = (try? String(contentsOfFile: state + "/logs/host.log", encoding: .utf8)) ?? ""
        return log.contains("heard 3")
      },
      observe: { pid in
        var facts: [String: String] = [:]
        defer { seen.withLock { $0 = facts } }
        UpgradeTests.awaitAnswer(h, state: state)
        let workers = UpgradeTests.liveWorkers(of: pid)
        facts["workers"] = String(workers.count)
        let script = h.dir.url("slow.sh")
        try? """
        #!/bin/sh
        [ "$1" = upgrade-preflight ] && { echo ready 9.9.9; exit 0; }
        case "$*" in *--print-config*) exit 0;; esac
        exec sleep 600
        """.write(toFile: script, atomically: false, encoding: .utf8)
        chmod(script, 0o755)
        do { try UpgradeTests.replace(exe, with: script) } catch { facts["error"] = "\(error)" }
        let asking = Process()
        asking.executableURL = URL(fileURLWithPath: HostBinary.path)
        asking.arguments = ["upgrade", "--state", state]
        asking.standardOutput = FileHandle.nullDevice
        asking.standardError = FileHandle.nullDevice
        try? asking.run()
        // Mid-upgrade: the host's process now runs the new file, which never comes up.
        let end = Date().addingTimeInterval(60)
        while UpgradeTests.exe(pid) != "/usr/bin/sleep" && UpgradeTests.exe(pid) != "/bin/sleep"
          && Date() < end
        {
          usleep(10_000)
        }
        facts["mid"] = UpgradeTests.exe(pid)
        kill(pid, SIGKILL)
        while workers.contains(where: { kill($0, 0) == 0 }) && Date() < end { usleep(10_000) }
        facts["left"] = workers.filter { kill($0, 0) == 0 }.map(String.init).joined(separator: ",")
        asking.waitUntilExit()
        facts["asked"] = String(asking.terminationStatus)
        return [:]
      })
    let f = seen.withLock { $0 }
    #expect(f["error"] == nil && f["workers"] == "2", "\(f)")
    #expect(f["mid"]?.hasSuffix("/sleep") == true, "the host was killed while the new file ran: \(f)")
    #expect(f["left"] == "", "\(f)")
    #expect(f["asked"] == "4", "\(f)")
  }

  /// A module crashing at each start is restarted with back-off (0.25 s, doubling): upgraded
  /// while its fifth restart waits 4 s, the new image restarts it when that was due — not at
  /// once — and counts on (its next crash waits 8 s, not 0.25 s as a first crash would).
  @Test(.timeLimit(.minutes(3)))
  func aPendingRestartAndItsCrashCountAreKept() throws {
    let h = HostileHost(.current)
    let exe = try UpgradeTests.installCopy(in: h)
    var crasher = ModuleFixture(moduleID: "com.test.up.crasher", entryPoint: "up_crasher_entry")
    crasher.start = "abort(); return FORSETTI_OK;"
    try h.install(crasher)
    try h.install(Self.ticker)
    let state = h.dir.url("state")
    let log = state + "/logs/host.log"
    @Sendable func logged() -> String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
    let seen = Mutex<[String: String]>([:])
    let run = try h.run(
      for: 120, extraArguments: ["--max-restarts", "10"], executable: exe,
      ready: { logged().contains("will restart com.test.up.crasher in 4.0 s") },
      observe: { pid in
        var facts: [String: String] = [:]
        defer {
          seen.withLock { $0 = facts }
          kill(pid, SIGTERM)
        }
        do {
          try UpgradeTests.replace(exe, with: HostBinary.path)
          let r = try h.cli(["upgrade", "--state", state])
          facts["upgrade"] = "\(r.status): \(r.stdout + r.stderr)"
        } catch {
          facts["error"] = "\(error)"
        }
        let end = Date().addingTimeInterval(60)
        while !logged().contains("will restart com.test.up.crasher in 8.0 s") && Date() < end {
          usleep(50_000)
        }
        // The new image's first round logs to its file, not to the start's quiet console.
        facts["kept restart"] = String(logged().contains("(crash 5), as before the upgrade"))
        return [:]
      })
    let f = seen.withLock { $0 }
    #expect(f["error"] == nil && f["upgrade"]?.hasPrefix("0: ") == true, "\(f)")
    let upgradeAt = try #require(
      run.output.range(of: "upgrade: this host (pid"), "\(run.output.suffix(2000))")
    let after = String(run.output[upgradeAt.lowerBound...])
    let before = String(run.output[..<upgradeAt.lowerBound])
    // The restart due in 4 s (less the time since) was kept; the crash count went on from 5.
    #expect(f["kept restart"] == "true", "\(f)")
    #expect(
      after.contains("restarting com.test.up.crasher (crash 5 of at most 10 restarts)"),
      "\(after.prefix(3000))")
    #expect(after.contains("will restart com.test.up.crasher in 8.0 s"), "\(after.prefix(3000))")
    #expect(!after.contains("will restart com.test.up.crasher in 0.25 s"), "\(after.prefix(3000))")
    // Positive control: before the upgrade the back-off began at 0.25 s.
    #expect(before.contains("will restart com.test.up.crasher in 0.25 s"), "\(before.suffix(3000))")
  }

  /// A module whose binary was rebuilt while it ran (`run` keeps the version it loaded) is not
  /// kept by the new image: its worker is stopped, saying why, and the new binary started in a
  /// new worker; the module beside it keeps its worker (positive control).
  @Test(.timeLimit(.minutes(3)))
  func aModuleWhoseBinaryChangedIsStartedAnewAndOnlyIt() throws {
    let h = HostileHost(.current)
    let exe = try UpgradeTests.installCopy(in: h)
    var changing = ModuleFixture(moduleID: "com.test.up.changing", entryPoint: "up_changing_entry")
    changing.start = "fixture_log(\"version A\"); return FORSETTI_OK;"
    try h.install(changing)
    try h.install(Self.ticker)
    let state = h.dir.url("state")
    let seen = Mutex<[String: String]>([:])
    let run = try h.run(
      for: 120, executable: exe,
      ready: {
        (try? String(contentsOfFile: state + "/logs/host.log", encoding: .utf8))?.contains("tick 3") == true
      },
      observe: { pid in
        var facts: [String: String] = [:]
        defer {
          seen.withLock { $0 = facts }
          kill(pid, SIGTERM)
        }
        UpgradeTests.awaitAnswer(h, state: state)
        let before = UpgradeTests.liveWorkers(of: pid)
        do {
          var rebuilt = ModuleFixture(moduleID: "com.test.up.changing", entryPoint: "up_changing_entry")
          rebuilt.start = "fixture_log(\"version B\"); return FORSETTI_OK;"
          try h.install(rebuilt)
          try UpgradeTests.replace(exe, with: HostBinary.path)
          let r = try h.cli(["upgrade", "--state", state])
          facts["upgrade"] = "\(r.status): \(r.stdout + r.stderr)"
        } catch {
          facts["error"] = "\(error)"
        }
        let log = state + "/logs/host.log"
        let end = Date().addingTimeInterval(60)
        while !((try? String(contentsOfFile: log, encoding: .utf8))?.contains("version B") ?? false)
          && Date() < end
        {
          usleep(20_000)
        }
        let after = UpgradeTests.liveWorkers(of: pid)
        facts["kept"] = String(after.filter { before.contains($0) }.count)
        facts["new"] = String(after.filter { !before.contains($0) }.count)
        facts["log"] = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        return [:]
      })
    _ = run
    let f = seen.withLock { $0 }
    #expect(f["error"] == nil && f["upgrade"]?.hasPrefix("0: ") == true, "\(f["upgrade"] ?? "")")
    let log = f["log"] ?? ""
    #expect(log.contains("its binary is another now"), "\(log.suffix(3000))")
    #expect(log.contains("version B"), "\(log.suffix(3000))")
    // One worker kept (the ticker's), one new (the changed module's).
    #expect(f["kept"] == "1" && f["new"] == "1", "\(f["kept"] ?? "") \(f["new"] ?? "")")
    #expect(log.contains("kept com.test.up.ticker 1.0.0 running"), "\(log.suffix(3000))")
  }
}
