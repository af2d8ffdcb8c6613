import ForsettiTestSupport
import Foundation
import Testing

/// Modules serving modules under load (issue 39, ABI 1.3), through a real `forsetti-host run`, as
/// root and as uid 65534, with C modules written for it (`RoleLoadFixtures`): fair queues per
/// consumer, BUSY from a full queue at once, declared concurrency, deadlines that travel with the
/// call, cycles judged whatever thread calls, and "hung" judged by progress only. Every check is
/// on statuses and log lines, never on a time. Statuses are the ABI's: 0 FORSETTI_OK,
/// -10 UNAVAILABLE, -11 TIMEOUT, -13 CALL_CYCLE, -15 BUSY.
@Suite(.onTestThreads) struct RoleLoadTests {
  typealias F = RoleLoadFixtures

  static let timeout = -11
  static let callCycle = -13

  /// A `#define` of roles.h, as the header says it (the bounds are the header's, not the test's).
  static func roleConstant(_ name: String) -> Int {
    let path = ModuleFixture.includeDirectory + "/forsetti/services/roles.h"
    let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    let prefix = "#define \(name) "
    for line in text.split(separator: "\n") where line.hasPrefix(prefix) {
      let value = line.dropFirst(prefix.count).trimmingCharacters(in: .whitespaces)
      return Int(value.hasSuffix("u") ? String(value.dropLast()) : value) ?? -1
    }
    return -1
  }

  static func install(
    _ fixture: ModuleFixture, in host: HostileHost, capabilities: [String], _ manifestExtra: String
  ) throws {
    try fixture.install(
      in: host.dir, capabilities: capabilities, manifestExtra: manifestExtra, ccFlags: ["-D_GNU_SOURCE"])
  }

  /// What says `moduleID` was judged hung, crashed, restarted or quarantined. The same words are
  /// seen for the stuck provider of `aProviderStuckInOneCallIsKilledAndOnlyIt`: the positive
  /// control of every "nobody killed" below.
  static func kills(_ run: HostileHost.Run, _ moduleID: String) -> [String] {
    run.lines(moduleID).filter {
      $0.hasPrefix("hung: ") || $0.hasPrefix("crashed") || $0.contains("quarantined")
    } + run.hostLines.filter { $0.contains("restarting \(moduleID) ") }
  }

  /// Every line of the run that says a module was judged hung or crashed.
  static func anyKill(_ run: HostileHost.Run) -> [String] {
    run.output.split(separator: "\n").map(String.init).filter {
      $0.contains("] hung: ") || $0.contains("] crashed") || $0.contains("restarting ")
    }
  }

  /// The lines `moduleID` logged on standard output before the host began to stop its modules
  /// ("stopping all modules"): what a consumer was answered while every module ran. (Once the
  /// stop has begun, a consumer may be told UNAVAILABLE: the contract of the run, not the load.)
  static func linesBeforeStop(_ run: HostileHost.Run, _ moduleID: String) -> [String] {
    let prefix = "[module=\(moduleID)] "
    var out: [String] = []
    for line in run.stdout.split(separator: "\n") {
      if line.contains("[host] stopping all modules") { break }
      if let r = line.range(of: prefix) { out.append(String(line[r.upperBound...])) }
    }
    return out
  }

  /// The last line of `moduleID` starting `prefix`.
  static func last(_ run: HostileHost.Run, _ moduleID: String, _ prefix: String) -> String? {
    run.lines(moduleID).last { $0.hasPrefix(prefix) }
  }

  // MARK: 1. A slow provider under four consumer modules

  /// Issue 39, first finding: a provider answering every call in 2.8 s, with four consumer
  /// modules of four threads each calling it without a pause for three minutes, was killed as
  /// hung every ~31 s and quarantined. Now it serves to the end under one pid: no hung line, no
  /// crash, no restart, no quarantine; every consumer was answered OK, and again after its first
  /// 10 s, and while all modules ran was told nothing but OK, BUSY or TIMEOUT. Positive control:
  /// the consumers did ask more than the provider could serve (some BUSY or TIMEOUT).
  @Test(.timeLimit(.minutes(8)), arguments: HostileHost.Identity.allCases)
  func aSlowProviderUnderFourConsumerModulesIsNeverKilledAndEveryConsumerIsAnswered(
    as identity: HostileHost.Identity
  ) throws {
    let host = HostileHost(identity)
    try #require(host.isAvailable, "running as another user needs root")
    let provider = "com.test.load.db"
    try Self.install(
      F.slowProvider(moduleID: provider, entryPoint: "load_db_entry", millis: 2800, reportEverySeconds: 10),
      in: host, capabilities: ["shared_database"], F.holds("shared_database"))
    let consumers = (1...4).map { "com.test.load.c\($0)" }
    for (i, id) in consumers.enumerated() {
      try Self.install(
        F.loadConsumer(
          moduleID: id, entryPoint: "load_c\(i + 1)_entry", threads: 4, method: "slow",
          reportEveryMillis: 10_000),
        in: host, capabilities: ["shared_database"], F.consumesSharedDatabase)
    }
    let run = try host.run(for: 180)
    #expect(!run.killedByWatchdog)
    #expect(run.status == 0, "\(run.stderr)")
    #expect(Self.kills(run, provider).isEmpty, "\(Self.kills(run, provider))")
    #expect(Self.anyKill(run).isEmpty, "\(Self.anyKill(run))")
    let starts = run.lines(provider).filter { $0.hasPrefix("serving pid=") }
    #expect(starts.count == 1, "\(run.lines(provider))")
    let served = Self.last(run, provider, "served ").flatMap { Int($0.dropFirst("served ".count)) } ?? 0
    #expect(served > 0, "\(run.lines(provider))")
    var contended = 0
    for id in consumers {
      let counts = Self.linesBeforeStop(run, id).filter { $0.hasPrefix("counts ") }
      try #require(counts.count >= 4, "\(id): \(run.lines(id))")
      let final = F.words(counts[counts.count - 1])
      let first = F.words(counts[0])
      // Answered OK, and not only in its first 10 s: served in turn all along. (Served in turn,
      // one call per consumer at a time, each consumer has an OK every ~35 s or so: 4 × 2.8 s a
      // round against a 10 s deadline leaves only the calls that waited less than 7.2 s.)
      #expect(final["ok", default: 0] >= 1, "\(id): \(counts)")
      #expect(final["ok", default: 0] > first["ok", default: 0], "\(id): \(counts)")
      // Nothing but OK, BUSY or TIMEOUT: no UNAVAILABLE from a provider killed or quarantined.
      #expect(final["other"] == 0, "\(id): \(counts)")
      contended += final["busy", default: 0] + final["timeout", default: 0]
    }
    #expect(contended > 0, "\(consumers.map { Self.last(run, $0, "counts ") ?? "-" })")
  }

  // MARK: 2. A polite consumer beside a flooding one

  /// Issue 39, third finding: while one consumer's calls kept a provider busy, another
  /// consumer's calls timed out. Calls wait in one queue per consumer, served in turn: a
  /// 1-thread consumer beside a 4-thread one, both calling a provider that takes 1 s a call (one
  /// at a time), is answered OK every time and never TIMEOUT. Positive control: the 4-thread
  /// consumer was answered too, and the provider served its calls between the polite consumer's
  /// first and last (it was busy with the flood all along).
  @Test(.timeLimit(.minutes(4)), arguments: HostileHost.Identity.allCases)
  func aOneThreadConsumerBesideAFloodingOneNeverTimesOut(as identity: HostileHost.Identity) throws {
    let host = HostileHost(identity)
    try #require(host.isAvailable, "running as another user needs root")
    let provider = "com.test.fair.db"
    let flood = "com.test.fair.flood"
    let polite = "com.test.fair.polite"
    try Self.install(
      F.slowProvider(moduleID: provider, entryPoint: "fair_db_entry", millis: 1000, logEachCall: true),
      in: host, capabilities: ["shared_database"], F.holds("shared_database"))
    try Self.install(
      F.loadConsumer(
        moduleID: flood, entryPoint: "fair_flood_entry", threads: 4, method: "slow", reportEveryMillis: 1000),
      in: host, capabilities: ["shared_database"], F.consumesSharedDatabase)
    // Its first call 2 s after its start: the flood is calling by then.
    try Self.install(
      F.loadConsumer(
        moduleID: polite, entryPoint: "fair_polite_entry", threads: 1, method: "slow", calls: 8,
        startDelayMillis: 2000),
      in: host, capabilities: ["shared_database"], F.consumesSharedDatabase)
    let run = try host.run(for: 120, stopWhen: { $0.contains("[module=\(polite)] done ") })
    let done = try #require(Self.last(run, polite, "done "), "\(run.output)")
    let w = F.words(done)
    #expect(w["timeout"] == 0, "\(done)")
    #expect(w["ok"] == 8 && w["busy"] == 0 && w["other"] == 0, "\(done)")
    // Positive control: the flood was answered, and served while the polite consumer called.
    let floodCounts = try #require(
      Self.linesBeforeStop(run, flood).last { $0.hasPrefix("counts ") }, "\(run.lines(flood))")
    #expect(F.words(floodCounts)["ok", default: 0] >= 1, "\(floodCounts)")
    #expect(F.words(floodCounts)["other"] == 0, "\(floodCounts)")
    let calls = run.lines(provider).filter { $0.hasPrefix("slow call from ") }
    let first = try #require(calls.firstIndex(of: "slow call from \(polite)"), "\(calls)")
    let lastPolite = try #require(calls.lastIndex(of: "slow call from \(polite)"), "\(calls)")
    let between = calls[first...lastPolite].filter { $0 == "slow call from \(flood)" }
    #expect(between.count >= 1, "\(calls)")
    #expect(Self.anyKill(run).isEmpty, "\(Self.anyKill(run))")
  }

  // MARK: 3. Cycles

  /// Issue 39, second finding: A→B→C, and C's handler calls A back from a thread it starts:
  /// the path a call carries does not see it, and innocent A or B was killed as hung. Judged on
  /// the wait-for graph, the fresh thread's call closes a cycle (A has no free handler and waits,
  /// through B, on C) and is refused at once with CALL_CYCLE; A's outside consumer is answered
  /// (OK, the chain in its answer), never TIMEOUT, three rounds running; nobody is killed.
  @Test(.timeLimit(.minutes(4)), arguments: HostileHost.Identity.allCases)
  func aCycleReEnteredFromAFreshThreadIsRefusedAndNobodyIsKilled(as identity: HostileHost.Identity) throws {
    let host = HostileHost(identity)
    try #require(host.isAvailable, "running as another user needs root")
    let (a, b, c, outside) = ("com.test.cyc.a", "com.test.cyc.b", "com.test.cyc.c", "com.test.cyc.outside")
    try Self.install(
      F.cycleMember(
        moduleID: a, entryPoint: "cyc_a_entry", tag: "B", serves: "shared_database", calls: "authentication"),
      in: host, capabilities: ["shared_database", "authentication"],
      F.holds("shared_database") + F.requires(["authentication"]))
    try Self.install(
      F.cycleMember(moduleID: b, entryPoint: "cyc_b_entry", tag: "C", serves: "authentication", calls: "api"),
      in: host, capabilities: ["authentication", "api"], F.holds("authentication") + F.requires(["api"]))
    try Self.install(
      F.cycleMember(
        moduleID: c, entryPoint: "cyc_c_entry", tag: "A", serves: "api", calls: "shared_database",
        freshThread: true),
      in: host, capabilities: ["api", "shared_database"], F.holds("api") + F.requires(["shared_database"]))
    try Self.install(
      F.roundsConsumer(
        moduleID: outside, entryPoint: "cyc_outside_entry", role: "shared_database", method: "cycle",
        rounds: 3),
      in: host, capabilities: ["shared_database"], F.consumesSharedDatabase)
    let run = try host.run(for: 90, stopWhen: { $0.contains("[module=\(outside)] rounds ") })
    #expect(run.lines(outside).contains("rounds done"), "\(run.output)")
    let rounds = run.lines(outside).filter { $0.hasPrefix("round ") }
    #expect(rounds.count == 3, "\(run.output)")
    for round in rounds {
      // Answered OK, a CALL_CYCLE inside its chain, no TIMEOUT anywhere in it.
      #expect(round.contains(" -> 0 ") && round.contains("=\(Self.callCycle)("), "\(round)")
      #expect(!round.contains("\(Self.timeout)"), "\(round)")
    }
    // Which call was refused: the fresh thread's, the one that closed the cycle.
    #expect(rounds.allSatisfy { $0.hasSuffix(" -> 0 B=0(C=0(A=-13()))") }, "\(rounds)")
    #expect(
      run.lines(c).contains("from \(b): inner \(Self.callCycle) (fresh thread)"), "\(run.lines(c))")
    #expect(Self.anyKill(run).isEmpty, "\(Self.anyKill(run))")
  }

  /// The mutual pair: A's handler calls B and B's handler calls A (each after 300 ms), while X
  /// calls A and Y calls B at the same moment (the same instant of the real-time clock), five
  /// rounds. Each round ends in a refusal (CALL_CYCLE), never in a TIMEOUT; X and Y are answered
  /// OK every round; nobody is killed.
  @Test(.timeLimit(.minutes(4)), arguments: HostileHost.Identity.allCases)
  func theMutualPairIsRefusedNotTimedOut(as identity: HostileHost.Identity) throws {
    let host = HostileHost(identity)
    try #require(host.isAvailable, "running as another user needs root")
    let (a, b, x, y) = ("com.test.pair.a", "com.test.pair.b", "com.test.pair.x", "com.test.pair.y")
    try Self.install(
      F.cycleMember(
        moduleID: a, entryPoint: "pair_a_entry", tag: "B", serves: "shared_database", calls: "authentication",
        sleepMillis: 300),
      in: host, capabilities: ["shared_database", "authentication"],
      F.holds("shared_database") + F.requires(["authentication"]))
    try Self.install(
      F.cycleMember(
        moduleID: b, entryPoint: "pair_b_entry", tag: "A", serves: "authentication", calls: "shared_database",
        sleepMillis: 300),
      in: host, capabilities: ["shared_database", "authentication"],
      F.holds("authentication") + F.requires(["shared_database"]))
    try Self.install(
      F.roundsConsumer(
        moduleID: x, entryPoint: "pair_x_entry", role: "shared_database", method: "cycle", rounds: 5,
        alignMillis: 2000),
      in: host, capabilities: ["shared_database"], F.consumesSharedDatabase)
    try Self.install(
      F.roundsConsumer(
        moduleID: y, entryPoint: "pair_y_entry", role: "authentication", method: "cycle", rounds: 5,
        alignMillis: 2000),
      in: host, capabilities: ["authentication"], F.requires(["authentication"]))
    let run = try host.run(
      for: 120,
      stopWhen: { $0.contains("[module=\(x)] rounds ") && $0.contains("[module=\(y)] rounds ") })
    let rounds = (run.lines(x) + run.lines(y)).filter { $0.hasPrefix("round ") }
    #expect(run.lines(x).contains("rounds done") && run.lines(y).contains("rounds done"), "\(run.output)")
    #expect(rounds.count == 10, "\(rounds)")
    #expect(rounds.allSatisfy { $0.contains(" -> 0 ") }, "\(rounds)")
    #expect(rounds.contains { $0.contains("=\(Self.callCycle)(") }, "\(rounds)")
    let inner = run.lines(a) + run.lines(b)
    #expect(inner.contains { $0.hasSuffix(": inner \(Self.callCycle)") }, "\(inner)")
    #expect(!(rounds + inner).contains { $0.contains("\(Self.timeout)") }, "\(rounds + inner)")
    #expect(Self.anyKill(run).isEmpty, "\(Self.anyKill(run))")
  }

  // MARK: 4. Stuck for good

  /// A provider whose handler never leaves one call is hung: killed once that call's deadline
  /// and the grace have passed, with a host line naming the call's method and its consumer,
  /// recorded like a crash and restarted. Only it: a healthy provider beside it, called without
  /// a pause, keeps its one start and no kill line, and its consumer is answered OK before and
  /// after the kill (the order of `host.log`).
  @Test(.timeLimit(.minutes(4)), arguments: HostileHost.Identity.allCases)
  func aProviderStuckInOneCallIsKilledAndOnlyIt(as identity: HostileHost.Identity) throws {
    let host = HostileHost(identity)
    try #require(host.isAvailable, "running as another user needs root")
    let (stuck, patient) = ("com.test.stuck", "com.test.patient")
    let (healthy, regular) = ("com.test.healthy", "com.test.regular")
    try Self.install(
      F.stuckProvider(moduleID: stuck, entryPoint: "stuck_entry", role: "shared_database"),
      in: host, capabilities: ["shared_database"], F.holds("shared_database"))
    try Self.install(
      F.roundsConsumer(
        moduleID: patient, entryPoint: "patient_entry", role: "shared_database", method: "hang", rounds: 1),
      in: host, capabilities: ["shared_database"], F.consumesSharedDatabase)
    try Self.install(
      F.slowProvider(moduleID: healthy, entryPoint: "healthy_entry", role: "authentication", millis: 0),
      in: host, capabilities: ["authentication"], F.holds("authentication"))
    try Self.install(
      F.loadConsumer(
        moduleID: regular, entryPoint: "regular_entry", role: "authentication", threads: 1, method: "ping",
        pauseMillis: 100, reportEveryMillis: 1000),
      in: host, capabilities: ["authentication"], F.requires(["authentication"]))
    let state = host.dir.url("state")
    // Stopped once the stuck provider has been killed, restarted and has started again, and the
    // healthy pair has gone on for a while after the kill: the time is only an upper bound.
    let run = try host.run(
      for: 120,
      stopWhen: { _ in
        let log = F.hostLog(state)
        guard let kill = log.firstIndex(where: { $0.hasPrefix("[module=\(stuck)] hung: ") }) else {
          return false
        }
        let after = log[kill...]
        return after.contains { $0.hasPrefix("[host] restarting \(stuck) ") }
          && after.contains { $0.hasPrefix("[module=\(stuck)] serving pid=") }
          && after.filter { $0.hasPrefix("[module=\(regular)] counts ") }.count >= 3
      })
    let hung = run.lines(stuck).first { $0.hasPrefix("hung: ") }
    #expect(hung?.contains("killing its worker") == true, "\(run.output)")
    #expect(hung?.contains("hang") == true && hung?.contains(patient) == true, "\(hung ?? "")")
    #expect(run.lines(stuck).contains { $0.hasPrefix("crashed: hung: ") }, "\(run.lines(stuck))")
    #expect(run.hostLines.contains { $0.contains("restarting \(stuck) ") }, "\(run.hostLines)")
    #expect(run.lines(stuck).filter { $0.hasPrefix("serving pid=") }.count >= 2, "\(run.lines(stuck))")
    // Its consumer's call ended at its deadline, before the kill.
    #expect(
      run.lines(patient).contains { $0.hasPrefix("round 1 -> \(Self.timeout)") }, "\(run.lines(patient))")
    // Only it: the healthy provider started once and was never judged, its consumer answered
    // OK all along, before the kill and after.
    #expect(Self.kills(run, healthy).isEmpty, "\(Self.kills(run, healthy))")
    #expect(Self.kills(run, regular).isEmpty, "\(Self.kills(run, regular))")
    #expect(run.lines(healthy).filter { $0.hasPrefix("serving pid=") }.count == 1, "\(run.lines(healthy))")
    let log = F.hostLog(state)
    let kill = try #require(log.firstIndex { $0.hasPrefix("[module=\(stuck)] hung: ") }, "\(log)")
    let counts = "[module=\(regular)] counts "
    let before = try #require(log[..<kill].last { $0.hasPrefix(counts) }, "\(log)")
    let after = try #require(log[kill...].last { $0.hasPrefix(counts) }, "\(log)")
    #expect(F.words(before)["ok", default: 0] > 0, "\(before)")
    #expect(F.words(after)["ok", default: 0] > F.words(before)["ok", default: 0], "\(before) / \(after)")
    #expect(F.words(after)["other"] == 0 && F.words(after)["timeout"] == 0, "\(after)")
  }

  // MARK: 5. A full queue answers BUSY at once

  /// 16 threads of one consumer, released together, against a provider serving one call at a
  /// time in 1.5 s: one call runs, FORSETTI_ROLE_QUEUE_DEPTH wait, the other 11 are answered
  /// BUSY — each before any OK answer had arrived (the consumer counts the OKs it has at each
  /// BUSY: "at once", judged by order, not by a clock). The BUSY calls never reach the handler;
  /// the five others all run and are answered OK (none waits out its deadline).
  @Test(.timeLimit(.minutes(3)), arguments: HostileHost.Identity.allCases)
  func sixteenThreadsAgainstAFullQueueGetBusyAtOnce(as identity: HostileHost.Identity) throws {
    let host = HostileHost(identity)
    try #require(host.isAvailable, "running as another user needs root")
    let depth = Self.roleConstant("FORSETTI_ROLE_QUEUE_DEPTH")
    // One running and `depth` waiting, 1.5 s each, all answered within the deadline.
    try #require(depth >= 1 && depth <= 5, "FORSETTI_ROLE_QUEUE_DEPTH as roles.h says: \(depth)")
    let (provider, consumer) = ("com.test.burst.db", "com.test.burst.app")
    try Self.install(
      F.slowProvider(moduleID: provider, entryPoint: "burst_db_entry", millis: 1500, logEachCall: true),
      in: host, capabilities: ["shared_database"], F.holds("shared_database"))
    try Self.install(
      F.burstConsumer(
        moduleID: consumer, entryPoint: "burst_app_entry", role: "shared_database", threads: 16,
        method: "slow",
        request: ""),
      in: host, capabilities: ["shared_database"], F.consumesSharedDatabase)
    let run = try host.run(for: 90, stopWhen: { $0.contains("[module=\(consumer)] burst ") })
    #expect(run.lines(consumer).contains("ping -> 0"), "\(run.lines(consumer))")
    let burst = try #require(Self.last(run, consumer, "burst "), "\(run.output)")
    let w = F.words(burst)
    let accepted = 1 + depth
    #expect(w["ok"] == accepted && w["busy"] == 16 - accepted, "\(burst)")
    #expect(w["timeout"] == 0 && w["other"] == 0, "\(burst)")
    #expect(w["busy_after_ok"] == 0, "\(burst)")
    let ran = run.lines(provider).filter { $0 == "slow call from \(consumer)" }
    #expect(ran.count == accepted, "\(run.lines(provider))")
    #expect(Self.anyKill(run).isEmpty, "\(Self.anyKill(run))")
  }

  // MARK: 6. Declared concurrency

  /// A provider declaring concurrency 8 (`serve_concurrently`) runs 8 slow calls at once: its
  /// handler, holding each call until 8 are inside (at most 5 s), saw 8. Control in the same
  /// host: the same handler served with plain `serve` (1, as every ABI 1.0–1.2 module) never
  /// sees more than one call inside, though at least two ran.
  @Test(.timeLimit(.minutes(3)), arguments: HostileHost.Identity.allCases)
  func aProviderDeclaringConcurrencyEightServesEightCallsAtOnce(as identity: HostileHost.Identity) throws {
    let host = HostileHost(identity)
    try #require(host.isAvailable, "running as another user needs root")
    let (wide, wideApp) = ("com.test.wide.db", "com.test.wide.app")
    let (narrow, narrowApp) = ("com.test.narrow.db", "com.test.narrow.app")
    try Self.install(
      F.meterProvider(
        moduleID: wide, entryPoint: "wide_db_entry", role: "shared_database", concurrency: 8, target: 8),
      in: host, capabilities: ["shared_database"], F.holds("shared_database"))
    try Self.install(
      F.burstConsumer(
        moduleID: wideApp, entryPoint: "wide_app_entry", role: "shared_database", threads: 8, method: "meter",
        request: "5000"),
      in: host, capabilities: ["shared_database"], F.consumesSharedDatabase)
    try Self.install(
      F.meterProvider(
        moduleID: narrow, entryPoint: "narrow_db_entry", role: "authentication", concurrency: nil, target: 8),
      in: host, capabilities: ["authentication"], F.holds("authentication"))
    try Self.install(
      F.burstConsumer(
        moduleID: narrowApp, entryPoint: "narrow_app_entry", role: "authentication", threads: 8,
        method: "meter",
        request: "500"),
      in: host, capabilities: ["authentication"], F.requires(["authentication"]))
    let run = try host.run(
      for: 90,
      stopWhen: { $0.contains("[module=\(wideApp)] burst ") && $0.contains("[module=\(narrowApp)] burst ") })
    #expect(run.lines(wide).contains("serve_concurrently(8) -> 0"), "\(run.lines(wide))")
    let wideBurst = try #require(Self.last(run, wideApp, "burst "), "\(run.output)")
    let w = F.words(wideBurst)
    #expect(w["max"] == 8, "\(wideBurst)")
    #expect(w["ok"] == 8 && w["busy"] == 0 && w["timeout"] == 0 && w["other"] == 0, "\(wideBurst)")
    let narrowBurst = try #require(Self.last(run, narrowApp, "burst "), "\(run.output)")
    let n = F.words(narrowBurst)
    #expect(n["max"] == 1, "\(narrowBurst)")
    #expect(n["ok", default: 0] >= 2 && n["timeout"] == 0 && n["other"] == 0, "\(narrowBurst)")
    #expect(Self.anyKill(run).isEmpty, "\(Self.anyKill(run))")
  }

  // MARK: 7. Deadlines travel with the call

  /// A handler reads the time left of the call it serves: under a consumer's `call_within(2000,
  /// …)` at most 2 s and more than none; under a plain call more than 2 s and at most the host's
  /// deadline (the control that `call_within` changed it); on a thread serving no call, 0. A
  /// call still queued at its own deadline (500 ms, behind a 3 s call) is answered TIMEOUT and
  /// never runs: the handler saw the call before it and the one after it, never it.
  @Test(.timeLimit(.minutes(3)), arguments: HostileHost.Identity.allCases)
  func deadlinesTravelWithTheCallAndAQueuedCallPastItsDeadlineNeverRuns(
    as identity: HostileHost.Identity
  ) throws {
    let host = HostileHost(identity)
    try #require(host.isAvailable, "running as another user needs root")
    let callTimeoutMs = Self.roleConstant("FORSETTI_ROLE_CALL_TIMEOUT_MS")
    try #require(callTimeoutMs > 3000, "FORSETTI_ROLE_CALL_TIMEOUT_MS as roles.h says: \(callTimeoutMs)")
    let (provider, consumer) = ("com.test.deadline.db", "com.test.deadline.app")
    try Self.install(
      F.deadlineProvider(moduleID: provider, entryPoint: "deadline_db_entry"),
      in: host, capabilities: ["shared_database"], F.holds("shared_database"))
    try Self.install(
      F.deadlineConsumer(moduleID: consumer, entryPoint: "deadline_app_entry"),
      in: host, capabilities: ["shared_database"], F.consumesSharedDatabase)
    let run = try host.run(for: 90, stopWhen: { $0.contains("[module=\(consumer)] deadlines done") })
    #expect(run.lines(consumer).contains("ping -> 0"), "\(run.output)")
    let left = try #require(Self.last(run, consumer, "left "), "\(run.output)")
    let l = F.words(left)
    let twoSeconds = 2_000_000_000
    #expect(l["outside"] == 0, "\(left)")
    #expect(l["within_status"] == 0 && l["plain_status"] == 0, "\(left)")
    let within = l["within", default: -1]
    #expect(within > 0 && within <= twoSeconds, "\(left)")
    let plain = l["plain", default: -1]
    #expect(plain > twoSeconds && plain <= callTimeoutMs * 1_000_000, "\(left)")
    let slow = try #require(Self.last(run, consumer, "slow "), "\(run.output)")
    let s = F.words(slow)
    #expect(s["first"] == 0 && s["second"] == Self.timeout && s["third"] == 0, "\(slow)")
    let ran = run.lines(provider).filter { $0.hasPrefix("slow ran ") }
    #expect(ran == ["slow ran first", "slow ran third"], "\(run.lines(provider))")
    #expect(Self.anyKill(run).isEmpty, "\(Self.anyKill(run))")
  }
}
