import ForsettiTestSupport
import Foundation
import Testing

/// A module's threads compete for the CPU as one: a real `forsetti-host run` with a module
/// spinning 16 threads beside one spinning 1. In cgroups with the cpu controller (a root host
/// here), the 1-thread module gets a fair share of what the two use, and `--cpu-weight` and
/// `--cpu-max` land in the worker's cgroup files. Where the host can make no cgroups (uid 65534
/// here), the start line says so and modules still run, competing thread by thread: the
/// measurement's positive control.
@Suite(.onTestThreads, .serialized) struct CPUContainmentTests {
  /// Starts `threads` threads spinning for ever, then logs the worker's pid.
  static func spinner(_ id: String, _ entry: String, threads: Int) -> ModuleFixture {
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.prelude = """
      #include <pthread.h>
      static volatile unsigned long spins;
      static void *spin(void *arg) { (void)arg; for (;;) spins++; return NULL; }
      """
    f.start = """
      for (int i = 0; i < \(threads); i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, spin, NULL) != 0) return FORSETTI_ERR_START_FAILED;
        pthread_detach(t);
      }
      char l[80];
      snprintf(l, sizeof l, "spinning \(threads) thread(s) in pid %d", (int)getpid());
      fixture_log(l);
      return FORSETTI_OK;
      """
    return f
  }

  /// CPU the two modules must use between the two readings (clock ticks, 100 a second): enough
  /// for the scheduler's shares to show, whatever else the machine runs.
  static let ticksToMeasure: UInt64 = 400

  @Test(arguments: HostileHost.Identity.allCases)
  func aModuleSpinning16ThreadsLeavesTheOtherItsShare(as identity: HostileHost.Identity) throws {
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    try h.install(Self.spinner("com.test.spin16", "spin16_entry", threads: 16))
    try h.install(Self.spinner("com.test.spin1", "spin1_entry", threads: 1))
    var idle = ModuleFixture(moduleID: "com.test.idle", entryPoint: "idle_entry")
    idle.start = "fixture_log(\"idle started\"); return FORSETTI_OK;"
    try h.install(idle)
    let output = h.dir.url("host-output.txt")
    let run = try h.run(
      for: 600,
      extraArguments: [
        "--cpu-weight", "100", "--cpu-weight", "com.test.idle=250", "--cpu-max", "com.test.idle=50",
        "--cpu-weight", "com.test.typo=5",
      ],
      ready: { Self.pids(in: output).count == 2 && Self.loggedIdle(output) },
      observe: { host in
        var facts = Self.measure(Self.pids(in: output))
        // The cgroup files of each worker, by module, where the worker has a cpu cgroup.
        for (module, pid) in Self.pids(in: output) {
          for (file, value) in Self.cpuFiles(of: pid) { facts["\(module) \(file)"] = value }
          facts["\(module) pid"] = String(pid)
          facts["\(module) session"] = String(Self.session(of: pid))
        }
        if let idlePid = Self.workerPid(of: "com.test.idle", host: host) {
          for (file, value) in Self.cpuFiles(of: idlePid) { facts["com.test.idle \(file)"] = value }
        }
        kill(host, SIGTERM)
        return facts
      })
    #expect(run.status == 0 && !run.killedByWatchdog, "\(run.output)")
    let facts = try #require(run.observed, "the modules never said they spin: \(run.output)")
    let start = run.hostLines.first { $0.contains("cgroups: ") } ?? ""
    let spin1 = try #require(facts["com.test.spin1"].flatMap(Double.init), "\(facts)")
    let spin16 = try #require(facts["com.test.spin16"].flatMap(Double.init), "\(facts)")
    let share = spin1 / (spin1 + spin16)
    print("CPUContainmentTests \(identity): spin1 \(spin1) ticks, spin16 \(spin16) ticks: share \(share)")
    if identity == .current && geteuid() == 0 {
      #expect(
        start.contains("cpu in ")
          && start.contains("cpu weight 100 each (com.test.idle 250, com.test.typo 5)"),
        "\(start)")
      #expect(start.contains("no ceiling but com.test.idle's 50% of a CPU"), "\(start)")
      // Per module, the one thread gets about as much as the sixteen (two CPUs: up to half, less
      // when the kernel balances shares across CPUs); per thread it would get 1/17.
      #expect(share >= 0.25, "spin1 got \(share) of the CPU the two used: \(facts)")
      // The weights and the ceiling landed in the workers' cgroups (v1 here, v2 where it is).
      let v1 = facts["com.test.spin1 cpu.shares"] != nil
      #expect(
        facts["com.test.spin1 " + (v1 ? "cpu.shares" : "cpu.weight")] == (v1 ? "1024" : "100"), "\(facts)")
      #expect(
        facts["com.test.spin16 " + (v1 ? "cpu.shares" : "cpu.weight")] == (v1 ? "1024" : "100"), "\(facts)")
      #expect(
        facts["com.test.idle " + (v1 ? "cpu.shares" : "cpu.weight")] == (v1 ? "2560" : "250"), "\(facts)")
      if v1 {
        #expect(facts["com.test.idle cpu.cfs_quota_us"] == "50000", "\(facts)")
        #expect(facts["com.test.idle cpu.cfs_period_us"] == "100000", "\(facts)")
        #expect(facts["com.test.spin1 cpu.cfs_quota_us"] == "-1", "\(facts)")
      } else {
        #expect(facts["com.test.idle cpu.max"] == "50000 100000", "\(facts)")
        #expect(facts["com.test.spin1 cpu.max"] == "max 100000", "\(facts)")
      }
    } else {
      // No cgroup at all: said once at start, and every module still runs.
      #expect(start.contains("NO cgroup for workers") && start.contains("no cpu controller"), "\(start)")
      #expect(run.output.components(separatedBy: "no cpu controller").count == 2, "\(run.output)")
      #expect(facts.keys.allSatisfy { !$0.contains("cpu.") }, "\(facts)")
      if start.contains("through the kernel's autogroup") {
        // Each worker a session of its own, so one autogroup each: per module again.
        #expect(share >= 0.25, "spin1 got \(share) with autogroup: \(facts)")
        // The positive control: the same measurement of 16 + 1 busy processes that are not
        // grouped gives the one about 1/17.
        let control = Self.ungroupedShare()
        #expect(control < 0.2, "one busy process of 17 ungrouped got \(control)")
      } else {
        // The host says the threads compete one by one (autogroup off, or the host inside a cpu
        // cgroup of the test runner's): the one thread gets about 1/17.
        #expect(start.contains("compete for the CPU one by one"), "\(start)")
        #expect(share < 0.2, "spin1 got \(share) without a cpu cgroup: \(facts)")
      }
    }
    // Every worker leads a session of its own (the unit autogroup shares the CPU by).
    for module in ["com.test.spin1", "com.test.spin16"] {
      let pid = facts["\(module) pid"]
      #expect(pid != nil && facts["\(module) session"] == pid, "\(module)'s worker: \(facts)")
    }
    #expect(run.lines("com.test.idle") == ["idle started"], "\(run.output)")
    // A module ID that names no module is said, once.
    let typo = "names com.test.typo, which is no module found at start"
    #expect(run.output.components(separatedBy: typo).count == 2, "\(run.output)")
  }

  /// The share of CPU one busy process gets beside 16 others, none sharing a session with
  /// another (Foundation's `Process` starts each in a session of its own).
  static func ungroupedShare() -> Double {
    let busy = (0..<17).compactMap { _ -> Process? in
      let p = Process()
      p.executableURL = URL(fileURLWithPath: "/bin/sh")
      p.arguments = ["-c", "while :; do :; done"]
      return (try? p.run()) == nil ? nil : p
    }
    defer {
      // SIGKILL: a child of a test thread inherits its blocked SIGTERM.
      for p in busy {
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
      }
    }
    var pids: [String: Int32] = [:]
    for (n, p) in busy.enumerated() { pids["\(n)"] = p.processIdentifier }
    let used = measure(pids).compactMapValues { Double($0) }
    let total = used.values.reduce(0, +)
    return total > 0 ? (used["0"] ?? 0) / total : 1
  }

  /// The session of `pid`, from /proc/PID/stat (field 6); -1 when it is gone.
  static func session(of pid: Int32) -> Int32 {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
      let close = stat.lastIndex(of: ")")
    else { return -1 }
    let rest = stat[stat.index(after: close)...].split(separator: " ")
    return rest.count > 3 ? Int32(rest[3]) ?? -1 : -1
  }

  /// The pids the spinners logged, by module ID.
  static func pids(in output: String) -> [String: Int32] {
    let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
    var found: [String: Int32] = [:]
    for line in text.split(separator: "\n") {
      guard let module = line.range(of: "[module="), let end = line[module.upperBound...].firstIndex(of: "]"),
        let pid = line.range(of: " in pid ")
      else { continue }
      found[String(line[module.upperBound..<end])] = Int32(line[pid.upperBound...])
    }
    return found
  }

  static func loggedIdle(_ output: String) -> Bool {
    ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").contains("idle started")
  }

  /// CPU (utime + stime, in ticks) each worker uses from now until the two together have used
  /// `ticksToMeasure`: an amount of CPU, not a length of time. A generous bound of wall-clock
  /// time only keeps a broken run from hanging (its result then shows too little measured).
  static func measure(_ pids: [String: Int32]) -> [String: String] {
    let before = pids.mapValues(ticks)
    let giveUp = Date().addingTimeInterval(300)
    var used: [String: UInt64] = [:]
    repeat {
      usleep(100_000)
      for (module, pid) in pids {
        let now = ticks(pid)
        used[module] = now >= (before[module] ?? 0) ? now - (before[module] ?? 0) : 0
      }
    } while used.values.reduce(0, +) < ticksToMeasure && Date() < giveUp
    return used.mapValues { String($0) }
  }

  /// utime + stime of `pid` (all its threads), from /proc/PID/stat; 0 when it is gone.
  static func ticks(_ pid: Int32) -> UInt64 {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
      let close = stat.lastIndex(of: ")")
    else { return 0 }
    // After "comm)": state is field 3, utime field 14, stime field 15.
    let rest = stat[stat.index(after: close)...].split(separator: " ")
    guard rest.count > 12, let user = UInt64(rest[11]), let system = UInt64(rest[12]) else { return 0 }
    return user + system
  }

  /// The worker of `moduleID`: the one process in its cpu cgroup `…/forsetti-HOST/MODULE-N`.
  static func workerPid(of moduleID: String, host: Int32) -> Int32? {
    guard let (mount, v1) = cpuMount() else { return nil }
    // `forsetti-<host>` is made beneath the host's own cgroup, which is not the root when this
    // test process was itself moved into one (an in-process host of another suite does that):
    // found from the host's /proc/<pid>/cgroup, where it sits in `forsetti-<host>/forsetti-host`.
    let lines = ((try? String(contentsOfFile: "/proc/\(host)/cgroup", encoding: .utf8)) ?? "")
      .split(separator: "\n")
    let own = lines.compactMap { line -> String? in
      let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
      guard fields.count == 3 else { return nil }
      let matches = v1 ? fields[1].split(separator: ",").contains("cpu") : fields[1].isEmpty
      return matches ? String(fields[2]) : nil
    }.first
    let hostLeaf = "/forsetti-\(host)/forsetti-host"
    let parent =
      own.map { path in
        path.hasSuffix(hostLeaf)
          ? mount + path.dropLast("/forsetti-host".count) : "\(mount)\(path)/forsetti-\(host)"
      }
      ?? "\(mount)/forsetti-\(host)"
    let names = (try? FileManager.default.contentsOfDirectory(atPath: parent)) ?? []
    // A module may have more than one leaf (one being set up or torn down): the one with a
    // process in it is the worker's.
    for leaf in names where leaf.hasPrefix(moduleID + "-") {
      let procs = (try? String(contentsOfFile: "\(parent)/\(leaf)/cgroup.procs", encoding: .utf8)) ?? ""
      if let pid = procs.split(separator: "\n").first.flatMap({ Int32($0) }) { return pid }
    }
    return nil
  }

  /// The cpu hierarchy's mount point and whether it is v1, from /proc/self/mountinfo.
  static func cpuMount() -> (String, Bool)? {
    let info = (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? ""
    var unified: String?
    for line in info.split(separator: "\n") {
      let fields = line.split(separator: " ")
      guard let dash = fields.firstIndex(of: "-"), fields.count > dash + 3 else { continue }
      if fields[dash + 1] == "cgroup", fields[dash + 3].split(separator: ",").contains("cpu") {
        return (String(fields[4]), true)
      }
      if fields[dash + 1] == "cgroup2" { unified = String(fields[4]) }
    }
    return unified.map { ($0, false) }
  }

  /// The cpu interface files of `pid`'s cgroup: v1 `cpu.shares` and the CFS quota and period,
  /// or v2 `cpu.weight` and `cpu.max`; empty where it has no cpu cgroup of its own.
  static func cpuFiles(of pid: Int32) -> [String: String] {
    guard let (mount, v1) = cpuMount(),
      let own = try? String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8)
    else { return [:] }
    let line = own.split(separator: "\n").first { l in
      let parts = l.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
      return parts.count == 3 && (v1 ? parts[1].split(separator: ",").contains("cpu") : parts[0] == "0")
    }
    guard let path = line?.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false).last,
      path.contains("/forsetti-"),
      // A host's own leaf (the test runner's, when a test in it prepared worker cgroups) is not a
      // worker's cgroup: an unprivileged host's workers stay in whatever cgroup they were born in.
      path.split(separator: "/").last.map(String.init) != "forsetti-host"
    else { return [:] }
    var files: [String: String] = [:]
    for name in v1 ? ["cpu.shares", "cpu.cfs_quota_us", "cpu.cfs_period_us"] : ["cpu.weight", "cpu.max"] {
      if let text = try? String(contentsOfFile: mount + path + "/" + name, encoding: .utf8) {
        files[name] = text.trimmingCharacters(in: .whitespacesAndNewlines)
      }
    }
    return files
  }
}

/// Bad `--cpu-weight` and `--cpu-max` values are usage errors naming the option, the value and
/// the range; `--help` says which CPU option is a share, which a ceiling and which a time limit.
@Suite(.onTestThreads) struct CPUOptionTests {
  @Test func badValuesAreUsageErrorsNamingTheRange() throws {
    let dir = TemporaryDirectory("cpu-options")
    try FileManager.default.createDirectory(atPath: dir.url("plugins"), withIntermediateDirectories: true)
    let common = ["run", "--plugins", dir.url("plugins"), "--state", dir.url("state"), "--for", "0"]
    for (option, value, why) in [
      ("cpu-weight", "0", "from 1 to 10000"), ("cpu-weight", "com.a=10001", "from 1 to 10000"),
      ("cpu-weight", "heavy", "[MODULE_ID=]N"), ("cpu-max", "0", "from 1 to 100000"),
      ("cpu-max", "50%", "[MODULE_ID=]N"), ("cpu-max", "=50", "module ID is missing"),
    ] {
      let r = try HostBinary.run(common + ["--\(option)", value])
      #expect(r.status == 2, "--\(option) \(value): \(r.stderr)")
      #expect(r.stderr.contains("'\(value)'") && r.stderr.contains("'--\(option)'"), "\(r.stderr)")
      #expect(r.stderr.contains(why), "\(r.stderr)")
    }
    let help = try HostBinary.run(["run", "--help"]).stdout
    #expect(help.contains("--cpu-weight [MODULE_ID=]N") && help.contains("--cpu-max [MODULE_ID=]PERCENT"))
    #expect(help.contains("(RLIMIT_CPU, at least 1); not a share"), "\(help)")
    let dev = try HostBinary.run(["dev", "--help"]).stdout
    #expect(dev.contains("--cpu-weight") && dev.contains("--cpu-max"))
  }
}
