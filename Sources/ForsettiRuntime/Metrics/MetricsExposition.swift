import ForsettiCore
import Glibc

/// The whole `/metrics` page, made at scrape time from the counters and the modules' records;
/// memory and CPU are read from each worker's cgroup now (in-process modules have none).
package enum MetricsExposition {
  /// Every state a module can be in, for the state set gauge.
  static let states = [
    "discovered", "gated", "loaded", "started", "stopped", "blocked", "failed", "inactive",
  ]

  /// The exposition of `metrics` with `records` as they are now, and `image`: what the host's
  /// executable is and how it came to run (the same value `status` says as `image`).
  package static func render(
    _ metrics: HostMetrics, records: [ModuleRecord], image: StatusAnswer.Image? = nil
  ) -> String {
    var t = MetricsText()
    let known = records.compactMap { r in r.moduleID.map { ($0, r) } }
    t.family("forsetti_module_state", .gauge, help: "1 for the state the module is in, 0 for the others.")
    for (id, r) in known {
      for s in states {
        t.sample("forsetti_module_state", [("module", id), ("state", s)], r.state.name == s ? 1 : 0)
      }
    }
    t.family(
      "forsetti_module_quarantined", .gauge, help: "1 while the module is quarantined after repeated crashes."
    )
    for (id, r) in known {
      t.sample("forsetti_module_quarantined", [("module", id)], r.state == .failed(.quarantined) ? 1 : 0)
    }
    let counters = metrics.allModules
    for c in counters { c.collectChannelCalls() }
    func perModule(
      _ name: String, _ type: MetricsText.Kind, _ help: String, _ value: (ModuleCounters) -> UInt64
    ) {
      t.family(name, type, help: help)
      for c in counters { t.sample(name, [("module", c.moduleID)], value(c)) }
    }
    func counter(_ name: String, _ help: String, _ value: (ModuleCounters) -> UInt64) {
      perModule(name, .counter, help, value)
    }
    func histogram(
      _ name: String, _ help: String,
      _ snapshot: (ModuleCounters) -> (cumulative: [UInt64], sumNanoseconds: UInt64)
    ) {
      t.family(name, .histogram, help: help)
      for c in counters { t.histogram(name, [("module", c.moduleID)], snapshot: snapshot(c)) }
    }
    counter("forsetti_module_restarts_total", "Restarts of the module's worker after a crash.") {
      $0.restarts.load(ordering: .relaxed)
    }
    t.family(
      "forsetti_module_crashes_total", .counter,
      help:
        "Crashes of the module's worker, by the signal its crash handler saw (none: hung, protocol violations, killed)."
    )
    for c in counters {
      for (signal, count) in c.crashesBySignal {
        t.sample("forsetti_module_crashes_total", [("module", c.moduleID), ("signal", signal)], count)
      }
    }
    counter("forsetti_module_quarantines_total", "Times the module was quarantined.") {
      $0.quarantines.load(ordering: .relaxed)
    }
    // One look at each histogram: the total and the histogram's count are then the same number
    // although calls go on during the scrape.
    let hostCalls = Dictionary(counters.map { ($0.moduleID, $0.hostCalls.snapshot()) }) { a, _ in a }
    counter("forsetti_module_host_calls_total", "Host calls served for the module.") {
      hostCalls[$0.moduleID]?.cumulative.last ?? 0
    }
    counter("forsetti_module_role_calls_total", "Calls of the module's role handler.") {
      $0.roleCalls.load(ordering: .relaxed)
    }
    counter(
      "forsetti_module_role_busy_total",
      "Calls of the module's role answered busy: the caller's queue at the module was full."
    ) { $0.roleBusy.load(ordering: .relaxed) }
    counter(
      "forsetti_module_role_timeouts_total",
      "Calls of the module's role that timed out (queued or running) before their deadline."
    ) { $0.roleTimedOut.load(ordering: .relaxed) }
    let loads = Dictionary(counters.map { ($0.moduleID, $0.roleLoad) }) { a, _ in a }
    perModule(
      "forsetti_module_role_calls_queued", .gauge, "Calls of the module's role waiting for a handler."
    ) {
      loads[$0.moduleID]?.queued ?? 0
    }
    perModule(
      "forsetti_module_role_calls_in_flight", .gauge, "Calls of the module's role its handlers run now."
    ) {
      loads[$0.moduleID]?.running ?? 0
    }
    counter("forsetti_module_dropped_log_lines_total", "Log lines of the module dropped by the rate limit.") {
      $0.droppedLogLines.load(ordering: .relaxed)
    }
    counter(
      "forsetti_module_dropped_telemetry_events_total",
      "Telemetry events of the module dropped by the rate limit."
    ) { $0.droppedTelemetryEvents.load(ordering: .relaxed) }
    histogram("forsetti_module_host_call_seconds", "Time the host took to serve a host call of the module.") {
      hostCalls[$0.moduleID] ?? $0.hostCalls.snapshot()
    }
    histogram(
      "forsetti_module_role_queue_wait_seconds",
      "Time calls of the module's role waited for a handler (as its worker counts)."
    ) { $0.roleQueueWait.snapshot() }
    let usage = counters.compactMap { c in CgroupUsage(c.cgroup).map { (c.moduleID, $0) } }
    t.family("forsetti_module_memory_bytes", .gauge, help: "Memory the module's worker cgroup uses.")
    for (id, u) in usage {
      if let m = u.memoryBytes { t.sample("forsetti_module_memory_bytes", [("module", id)], m) }
    }
    t.family("forsetti_module_cpu_seconds_total", .counter, help: "CPU time the module's worker cgroup used.")
    for (id, u) in usage {
      if let n = u.cpuNanoseconds {
        t.sample("forsetti_module_cpu_seconds_total", [("module", id)], MetricsText.seconds(n))
      }
    }
    t.family("forsetti_host_modules", .gauge, help: "Modules the host knows, by state.")
    for s in states {
      t.sample("forsetti_host_modules", [("state", s)], UInt64(records.filter { $0.state.name == s }.count))
    }
    t.family("forsetti_host_judging_seconds", .histogram, help: "Time of each judging of every module.")
    t.histogram("forsetti_host_judging_seconds", [], metrics.judgings)
    t.family("forsetti_host_reconcile_seconds", .histogram, help: "Time of each reconcile round.")
    t.histogram("forsetti_host_reconcile_seconds", [], metrics.reconciles)
    if let image { host(image, &t) }
    return t.text
  }

  /// The host's own series: its version, when it started, its upgrades and when the last one
  /// was (that one only once it has been upgraded).
  static func host(_ image: StatusAnswer.Image, _ t: inout MetricsText) {
    t.family(
      "forsetti_host_info", .gauge, help: "Always 1: the version of the executable the host runs, as a label."
    )
    t.sample("forsetti_host_info", [("version", image.version)], 1)
    t.family(
      "forsetti_host_started_timestamp_seconds", .gauge,
      help: "When the host started, in seconds since 1970: its first image, whatever upgrades came since.")
    t.sample("forsetti_host_started_timestamp_seconds", [], String(image.startedAt))
    t.family(
      "forsetti_host_upgrades_total", .counter,
      help: "Upgrades (forsetti-host upgrade) the host went through in the same process since it started.")
    t.sample("forsetti_host_upgrades_total", [], String(image.upgrades))
    guard let at = image.upgradedAt else { return }
    t.family(
      "forsetti_host_upgraded_timestamp_seconds", .gauge,
      help: "When the host last became a new executable (forsetti-host upgrade), in seconds since 1970.")
    t.sample("forsetti_host_upgraded_timestamp_seconds", [], String(at))
  }
}

/// Memory and CPU of a worker's cgroup, cgroup v2 (`memory.current`, `cpu.stat` usage_usec) or
/// v1 (`memory.usage_in_bytes`, `cpuacct.usage`), from whichever of its directories has them.
/// Where v1 mounts `cpuacct` apart from `cpu` (no `cpuacct.usage` in the worker's groups), the
/// CPU is the sum of its processes' own (`/proc/PID/stat`), listed by the group.
struct CgroupUsage {
  var memoryBytes: UInt64?
  var cpuNanoseconds: UInt64?

  init?(_ directories: [String]) {
    guard !directories.isEmpty else { return nil }
    for d in directories {
      memoryBytes =
        memoryBytes ?? Self.number(d + "/memory.current") ?? Self.number(d + "/memory.usage_in_bytes")
      if cpuNanoseconds == nil, let stat = Self.read(d + "/cpu.stat"),
        let usec = WorkerCgroup.field("usage_usec", in: stat)
      {
        cpuNanoseconds = UInt64(clamping: usec).multipliedReportingOverflow(by: 1000).partialValue
      }
      cpuNanoseconds = cpuNanoseconds ?? Self.number(d + "/cpuacct.usage")
    }
    if cpuNanoseconds == nil {
      cpuNanoseconds = directories.lazy.compactMap { Self.processes($0) }.first { !$0.isEmpty }
        .map { $0.reduce(UInt64(0)) { $0 &+ (Self.cpu(of: $1) ?? 0) } }
    }
    if memoryBytes == nil && cpuNanoseconds == nil { return nil }
  }

  /// The processes a group lists (`cgroup.procs`), nil when it cannot be read.
  private static func processes(_ directory: String) -> [Int32]? {
    read(directory + "/cgroup.procs").map { $0.split(separator: "\n").compactMap { Int32($0) } }
  }

  /// A process's user and system CPU (its threads', living and ended), in nanoseconds.
  static func cpu(of pid: Int32) -> UInt64? {
    guard let stat = read("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")") else { return nil }
    // After the command's closing parenthesis: state is field 3, utime 14, stime 15.
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = UInt64(fields[11]), let system = UInt64(fields[12]) else {
      return nil
    }
    let ticks = UInt64(max(1, sysconf(Int32(_SC_CLK_TCK))))
    return (user &+ system).multipliedReportingOverflow(by: 1_000_000_000 / ticks).partialValue
  }

  private static func number(_ path: String) -> UInt64? {
    read(path).flatMap(WorkerCgroup.bytes)
  }

  private static func read(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes = [UInt8](repeating: 0, count: 4096)
    let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
    guard n > 0 else { return nil }
    return String(decoding: bytes[0..<n], as: UTF8.self)
  }
}
