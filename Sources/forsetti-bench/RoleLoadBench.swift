import ForsettiRuntime
import Foundation
import Glibc

/// Issue 39: role providers under load, between isolated workers (ModuleManager, as the rest of
/// the roles section). A `shared_database` provider whose handler sleeps `workUS` µs declares
/// concurrency 1, 4 or 16 (`serve_concurrently`); 1, 4 or 16 consumer modules, each with
/// `threadsPerConsumer` threads calling back to back, load it for a window: calls answered a
/// second and the p50/p95 of a call as the consumers time it, beside the ideal of the same
/// window (the handler's own time, measured in the provider). Then fairness: one consumer
/// calling once at a time (polite), alone and beside a consumer of `floodThreads` threads
/// calling as fast as they can (a BUSY answer is retried at once), the two runs of a round in
/// alternated order; the target is the polite consumer's p95 beside the flood at most 2× its
/// p95 alone (medians of the per-round p95s).
///
/// Why a sleep and not a spin: on this 2-vCPU machine 16 handlers spinning 200 µs need 16 CPUs,
/// so throughput would be bounded by the cores (2 / 200 µs) whatever concurrency the provider
/// declares, and the figures would measure the machine. A sleep stands for what a provider
/// waits on (a disk, a lock, the network); it leaves the CPUs to the runtime's own queues,
/// threads and wake-ups, which is what these figures are about.
///
/// How the bench drives the modules: every module has a thread that looks for a file `go` in its
/// sandbox every 5 ms ("round start record end threads pauseUS", CLOCK_MONOTONIC ns, which
/// workers share with the bench); consumers call from `start` to `end`, keep the calls answered
/// between `record` and `end`, and write `result-ROUND`; the provider keeps its handler's times
/// and the most calls it had in flight over the same span. Each round starts a fresh host per
/// concurrency (provider + 16 consumers), in alternated order, as are the windows in it.
enum RoleLoadBench {
  typealias Row = (figure: Sample, baseline: Sample?, note: String)

  static let concurrencies = [1, 4, 16]
  static let consumerCounts = [1, 4, 16]
  /// Consumer modules in each host: the most any window uses.
  static let consumers = 16
  /// Calls each load consumer keeps going: FORSETTI_ROLE_QUEUE_DEPTH, so a consumer never has
  /// more waiting than its queue holds and a load window sees no BUSY from a correct runtime.
  static let threadsPerConsumer = 4
  static let floodThreads = 16
  static let workUS = 200
  static let warmupMS = 100
  static let politeTarget = 2.0
  static let providerID = "com.bench.rl.provider"

  static func consumerID(_ i: Int) -> String { "com.bench.rl.c\(i < 10 ? "0" : "")\(i)" }

  /// A window's participant: what its module reported.
  struct ModuleReport {
    var head: [Double] = []
    var samples: [Double] = []
    /// The provider's: per call of the polite consumer, its wait and the calls of others ahead.
    var extra: [Double] = []
  }

  /// One window: each consumer's report by ID, and the provider's.
  struct Window {
    var consumers: [String: ModuleReport]
    var provider: ModuleReport
    var seconds: Double
    /// CPU time spent by the host (this process) and its workers over the window.
    var cpu: CPU
    /// The provider worker's busiest thread over the window: its share of one CPU.
    var busiest: Double

    /// The consumer's head: answered OK, BUSY, TIMEOUT, any other status, threads that ran.
    func okOf(_ id: String) -> Double { consumers[id]?.head[0] ?? 0 }
    func busyOf(_ id: String) -> Double { consumers[id]?.head[1] ?? 0 }
    var ok: Double { consumers.values.reduce(0) { $0 + $1.head[0] } }
    var busy: Double { consumers.values.reduce(0) { $0 + $1.head[1] } }
    var timeouts: Double { consumers.values.reduce(0) { $0 + $1.head[2] } }
    var other: Double { consumers.values.reduce(0) { $0 + $1.head[3] } }
    /// The provider's head: calls answered in the window, the most in flight at once.
    var peak: Double { provider.head[1] }
    var handlerMean: Double {
      provider.samples.isEmpty ? .nan : provider.samples.reduce(0, +) / Double(provider.samples.count)
    }
    var handlerP50: Double { NeighbourBench.percentile(provider.samples.sorted(), 0.5) }
    /// The polite consumer's calls as the provider saw them: sent → handler entry, and how many
    /// calls of others entered the handler in between.
    var politeWaits: [Double] {
      stride(from: 0, to: provider.extra.count - 1, by: 2).map { provider.extra[$0] }
    }
    var politeAhead: [Double] { stride(from: 1, to: provider.extra.count, by: 2).map { provider.extra[$0] } }
    /// The machine's CPUs busy with the host and its workers, as a fraction of all of them.
    var busyCPUs: Double {
      cpu.total / (seconds * 1e9 * Double(ProcessInfo.processInfo.activeProcessorCount))
    }
  }

  /// CPU time (ns) of the host's process, the provider's worker, the consumers' workers.
  struct CPU {
    var host = 0.0
    var provider = 0.0
    var consumers = 0.0
    var total: Double { host + provider + consumers }
    static func - (a: CPU, b: CPU) -> CPU {
      CPU(host: a.host - b.host, provider: a.provider - b.provider, consumers: a.consumers - b.consumers)
    }
    static func / (a: CPU, n: Double) -> CPU {
      CPU(host: a.host / n, provider: a.provider / n, consumers: a.consumers / n)
    }
  }

  /// One (concurrency, consumer modules) cell over the rounds.
  struct Load {
    var throughput: [Double] = []
    var idealThroughput: [Double] = []
    var p50: [Double] = []
    var p95: [Double] = []
    var idealLatency: [Double] = []
    var handler: [Double] = []
    var peak: [Double] = []
    var busyCPUs: [Double] = []
    var cpuPerCall: [CPU] = []
    var busiestShare: [Double] = []
    var busy = 0.0
    var timeouts = 0.0
    var other = 0.0
  }

  /// The polite consumer alone and beside the flood, for one concurrency, over the rounds.
  struct Politeness {
    var aloneP50: [Double] = []
    var aloneP95: [Double] = []
    var besideP50: [Double] = []
    var besideP95: [Double] = []
    var floodOK: [Double] = []
    var floodBusy: [Double] = []
    var aloneWaitP95: [Double] = []
    var besideWaitP95: [Double] = []
    var aheadP50: [Double] = []
    var aheadP95: [Double] = []
    var floodBusyP50: [Double] = []
    var floodBusyP95: [Double] = []
    var aheadMax: [Double] = []
    var aloneCPUs: [Double] = []
    var besideCPUs: [Double] = []
    var politeFailed = 0.0
  }

  static func run(work: String, include: String, mode: ExecutionMode, rounds: Int, windowMS: Int) throws
    -> (rows: [Row], table: String)
  {
    let root = work + "/role-load"
    try install(root, include: include)
    sync()
    let floodPause = Int(ProcessInfo.processInfo.environment["FORSETTI_BENCH_FLOOD_PAUSE_US"] ?? "") ?? 0
    let loadBefore = NeighbourBench.loadAverage()
    let t0 = Clock.ns()
    var runner = Runner(windowMS: windowMS)
    var loads = Array(
      repeating: Array(repeating: Load(), count: consumerCounts.count), count: concurrencies.count)
    var polite = Array(repeating: Politeness(), count: concurrencies.count)
    var starts = 0
    for r in 0..<rounds {
      let cOrder = r % 2 == 0 ? Array(concurrencies.indices) : Array(concurrencies.indices.reversed())
      for ci in cOrder {
        let c = concurrencies[ci]
        progress("roles under load: round \(r + 1)/\(rounds), provider concurrency \(c)")
        starts += 1
        guard let host = try Host.start(root + "/c\(c)", state: root + "/state-\(starts)", mode: mode) else {
          continue
        }
        defer { host.stop() }
        let pid = host.manager.workerPID(providerID)
        // Channels set up and first calls judged, outside any measured window.
        _ = runner.window(host, (0..<consumers).map { (consumerID($0), 1) }, windowMS: 200)
        let kOrder = r % 2 == 0 ? Array(consumerCounts.indices) : Array(consumerCounts.indices.reversed())
        for ki in kOrder {
          let k = consumerCounts[ki]
          let outstanding = Double(k * threadsPerConsumer)
          guard let w = runner.window(host, (0..<k).map { (consumerID($0), threadsPerConsumer) }) else {
            continue
          }
          let latencies = w.consumers.values.flatMap(\.samples).sorted()
          let s = w.handlerMean
          loads[ci][ki].throughput.append(w.ok / w.seconds)
          loads[ci][ki].idealThroughput.append(min(Double(c), outstanding) / (s / 1e9))
          loads[ci][ki].p50.append(NeighbourBench.percentile(latencies, 0.50))
          loads[ci][ki].p95.append(NeighbourBench.percentile(latencies, 0.95))
          loads[ci][ki].idealLatency.append(max(1, outstanding / Double(c)) * s)
          loads[ci][ki].handler.append(w.handlerP50)
          loads[ci][ki].peak.append(w.peak)
          loads[ci][ki].busyCPUs.append(w.busyCPUs)
          loads[ci][ki].cpuPerCall.append(w.cpu / w.ok)
          loads[ci][ki].busiestShare.append(w.busiest)
          loads[ci][ki].busy += w.busy
          loads[ci][ki].timeouts += w.timeouts
          loads[ci][ki].other += w.other
        }
        // Alone, beside, or beside, alone: alternated round by round.
        let politeID = consumerID(0)
        let floodID = consumerID(1)
        for beside in r % 2 == 0 ? [false, true] : [true, false] {
          var who = [(politeID, 1)]
          if beside { who.append((floodID, floodThreads)) }
          guard let w = runner.window(host, who, pauseUS: floodPause) else { continue }
          let mine = (w.consumers[politeID]?.samples ?? []).sorted()
          let p50 = NeighbourBench.percentile(mine, 0.50)
          let p95 = NeighbourBench.percentile(mine, 0.95)
          polite[ci].politeFailed += (w.consumers[politeID]?.head[1...3].reduce(0, +)) ?? 0
          let wait = NeighbourBench.percentile(w.politeWaits.sorted(), 0.95)
          if beside {
            let ahead = w.politeAhead.sorted()
            polite[ci].besideP50.append(p50)
            polite[ci].besideP95.append(p95)
            polite[ci].floodOK.append(w.okOf(floodID) / w.seconds)
            polite[ci].floodBusy.append(w.busyOf(floodID) / w.seconds)
            polite[ci].besideWaitP95.append(wait)
            polite[ci].aheadP50.append(NeighbourBench.percentile(ahead, 0.50))
            polite[ci].aheadP95.append(NeighbourBench.percentile(ahead, 0.95))
            let busyTimes = (w.consumers[floodID]?.extra ?? []).sorted()
            if !busyTimes.isEmpty {
              polite[ci].floodBusyP50.append(NeighbourBench.percentile(busyTimes, 0.50))
              polite[ci].floodBusyP95.append(NeighbourBench.percentile(busyTimes, 0.95))
            }
            polite[ci].aheadMax.append(ahead.last ?? .nan)
            polite[ci].besideCPUs.append(w.busyCPUs)
          } else {
            polite[ci].aloneP50.append(p50)
            polite[ci].aloneP95.append(p95)
            polite[ci].aloneWaitP95.append(wait)
            polite[ci].aloneCPUs.append(w.busyCPUs)
          }
        }
        if let pid, host.manager.workerPID(providerID) != pid {
          progress(
            "roles under load: the provider's worker changed (\(pid) → \(host.manager.workerPID(providerID).map { "\($0)" } ?? "none")): \(host.tail())"
          )
        }
      }
    }
    let load =
      "load average \(loadBefore) before, \(NeighbourBench.loadAverage()) after; \(String(format: "%.0f", Double(Clock.ns() - t0) / 1e9)) s"
    let describe = Describe(rounds: rounds, windowMS: windowMS, floodPause: floodPause, load: load)
    return (rows(loads, polite, describe), table(loads, polite, describe))
  }

  struct Describe {
    var rounds: Int
    var windowMS: Int
    var floodPause: Int
    var load: String

    var flood: String {
      floodPause == 0
        ? "\(floodThreads) threads, BUSY retried at once"
        : "\(floodThreads) threads, \(floodPause) µs pause after BUSY"
    }
  }

  // MARK: - Hosts and windows

  /// A ModuleManager over one concurrency's directory, with a state directory of its own.
  struct Host {
    var manager: ModuleManager
    var state: String
    var log: MemoryLogSink
    /// The workers' process IDs once all are ready, the provider's first.
    var pids: [Int32] = []

    func sandbox(_ id: String) -> String { state + "/sandboxes/" + id }

    /// Starts the provider and the 16 consumers; nil (and why) unless every one is ready in 30 s.
    static func start(_ dir: String, state: String, mode: ExecutionMode) throws -> Host? {
      let (judgements, index) = try Fixtures.judge(dir)
      let log = MemoryLogSink()
      let m = ModuleManager(environment: HostEnvironment(stateDirectory: state, log: log), mode: mode)
      m.activate(judgements, index: index)
      var host = Host(manager: m, state: state, log: log)
      let ids = [providerID] + (0..<consumers).map(consumerID)
      let deadline = Clock.ns() + 30_000_000_000
      while Clock.ns() < deadline {
        if ids.allSatisfy({ access(host.sandbox($0) + "/ready", F_OK) == 0 }) {
          host.pids = ids.compactMap { m.workerPID($0) }
          if host.pids.count != ids.count || m.workerPID(providerID) != host.pids.first { host.pids = [] }
          return host
        }
        usleep(10_000)
      }
      let missing = ids.filter { access(host.sandbox($0) + "/ready", F_OK) != 0 }
      progress("roles under load: not ready in 30 s: \(missing.joined(separator: ", ")); \(host.tail())")
      host.stop()
      return nil
    }

    func stop() {
      manager.stopAll()
      try? FileManager.default.removeItem(atPath: state)
    }

    /// CPU time (ns) spent so far by this process (the host's threads), by the provider's worker
    /// and by the consumers' workers.
    func cpu() -> CPU {
      var usage = rusage()
      getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
      let own =
        Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e9
        + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e3
      return CPU(
        host: own, provider: pids.first.map { Host.cpu($0) } ?? 0,
        consumers: pids.dropFirst().reduce(0) { $0 + Host.cpu($1) })
    }

    /// utime + stime of a process or one of its threads (ns): fields 14 and 15 of /proc/PID/stat, the 12th and 13th after the ")".
    static func cpu(_ pid: Int32, task: String? = nil) -> Double {
      let path = task.map { "/proc/\(pid)/task/\($0)/stat" } ?? "/proc/\(pid)/stat"
      guard let text = try? String(contentsOfFile: path, encoding: .utf8),
        let paren = text.lastIndex(of: ")")
      else { return 0 }
      let fields = text[text.index(after: paren)...].split(separator: " ")
      guard fields.count > 12, let u = Double(fields[11]), let s = Double(fields[12]) else { return 0 }
      return (u + s) * 1e9 / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// CPU time (ns) of each thread of the provider's worker so far, by thread ID.
    func providerThreads() -> [String: Double] {
      guard let pid = pids.first,
        let tids = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")
      else { return [:] }
      var out: [String: Double] = [:]
      for tid in tids { out[tid] = Host.cpu(pid, task: tid) }
      return out
    }

    /// The host log's last lines, for a report of what went wrong.
    func tail() -> String {
      "the host said: " + log.all.suffix(6).map(\.message).joined(separator: " | ")
    }
  }

  struct Runner {
    var windowMS: Int
    var round: UInt64 = 0

    /// One measured window: `who` (consumer ID, threads) call; nil (and why) when a report is
    /// missing 15 s after the window (a call waits at most FORSETTI_ROLE_CALL_TIMEOUT_MS).
    mutating func window(_ host: Host, _ who: [(String, Int)], pauseUS: Int = 0, windowMS: Int? = nil)
      -> Window?
    {
      round += 1
      let length = UInt64(windowMS ?? self.windowMS) * 1_000_000
      // 30 ms for every module's 5 ms poll to see the order before its start.
      let start = Clock.ns() + 30_000_000
      let record = start + UInt64(warmupMS) * 1_000_000
      let end = record + length
      for (id, threads) in who + [(providerID, 0)] {
        let order = "\(round) \(start) \(record) \(end) \(threads) \(pauseUS)\n"
        guard put(order, host.sandbox(id) + "/go") else {
          progress("roles under load: cannot write the order for \(id)")
          return nil
        }
      }
      func sleep(until t: UInt64) {
        let wait = Int64(t) - Int64(Clock.ns())
        if wait > 0 { usleep(UInt32(wait / 1000)) }
      }
      sleep(until: record)
      let cpu0 = host.cpu()
      let threads0 = host.providerThreads()
      sleep(until: end)
      let cpu = host.cpu() - cpu0
      var busiest = 0.0
      for (tid, ns) in host.providerThreads() {
        busiest = max(busiest, (ns - (threads0[tid] ?? 0)) / Double(length))
      }
      var reports: [String: ModuleReport] = [:]
      let ids = who.map { $0.0 } + [providerID]
      let deadline = end + 15_000_000_000
      while reports.count < ids.count && Clock.ns() < deadline {
        for id in ids where reports[id] == nil {
          let path = host.sandbox(id) + "/result-\(round)"
          if let r = read(path) {
            reports[id] = r
            unlink(path)
          }
        }
        if reports.count < ids.count { usleep(5_000) }
      }
      guard reports.count == ids.count, let provider = reports.removeValue(forKey: providerID) else {
        progress(
          "roles under load: no report from \(ids.filter { reports[$0] == nil }.joined(separator: ", ")) 15 s after window \(round); \(host.tail())"
        )
        return nil
      }
      return Window(
        consumers: reports, provider: provider, seconds: Double(length) / 1e9, cpu: cpu, busiest: busiest)
    }

    /// Writes `text` to `path` through a temporary file, readable by the worker's user.
    func put(_ text: String, _ path: String) -> Bool {
      let tmp = path + ".tmp"
      let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
      guard fd >= 0 else { return false }
      fchmod(fd, 0o644)
      let bytes = Array(text.utf8)
      let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
      close(fd)
      return written == bytes.count && rename(tmp, path) == 0
    }

    /// A module's result file: [nhead, head…, n, samples…, nextra, extra…] as native 64-bit words.
    func read(_ path: String) -> ModuleReport? {
      guard let data = FileManager.default.contents(atPath: path), data.count >= 16 else { return nil }
      let words: [UInt64] = data.withUnsafeBytes { raw in
        (0..<raw.count / 8).map { raw.loadUnaligned(fromByteOffset: $0 * 8, as: UInt64.self) }
      }
      let nhead = Int(words[0])
      guard nhead >= 4, words.count >= 2 + nhead else { return nil }
      let n = Int(words[1 + nhead])
      guard words.count >= 3 + nhead + n else { return nil }
      let nextra = Int(words[2 + nhead + n])
      guard words.count == 3 + nhead + n + nextra else { return nil }
      return ModuleReport(
        head: words[1...nhead].map { Double($0) },
        samples: words[(2 + nhead)..<(2 + nhead + n)].map { Double($0) },
        extra: words[(3 + nhead + n)...].map { Double($0) })
    }
  }

  // MARK: - Reporting

  static func median(_ v: [Double]) -> Double { Sample(name: "", perOp: v).median }

  static func percent(_ v: Double) -> String { v.isFinite ? String(format: "%.0f%%", v * 100) : "-" }

  static func rows(_ loads: [[Load]], _ polite: [Politeness], _ d: Describe) -> [Row] {
    var out: [Row] = []
    for (ci, c) in concurrencies.enumerated() {
      for (ki, k) in consumerCounts.enumerated() {
        let l = loads[ci][ki]
        let who =
          "provider concurrency \(c), \(k) consumer module\(k == 1 ? "" : "s") × \(threadsPerConsumer) threads"
        let note =
          "handler \(human(median(l.handler))) (p50, in the provider); at most \(Int(l.peak.max() ?? 0)) calls in flight of \(c) declared; CPUs busy \(percent(median(l.busyCPUs))), \(cpuSplit(l.cpuPerCall)) of CPU a call (host / provider / consumers); the provider worker's busiest thread \(percent(median(l.busiestShare))) of a CPU; BUSY \(Int(l.busy)), TIMEOUT \(Int(l.timeouts)), other \(Int(l.other)) over \(l.p50.count) rounds; \(d.load)"
        out.append(
          (
            Sample(
              name: "roles under load: calls answered per second (calls/s), \(who)", perOp: l.throughput),
            Sample(
              name:
                "ideal calls/s: min(concurrency, calls outstanding) / the handler's mean time, same windows",
              perOp: l.idealThroughput),
            note
          ))
        let ideal = Sample(
          name:
            "ideal call latency: max(1, outstanding / concurrency) × the handler's mean time, same windows",
          perOp: l.idealLatency)
        out.append((Sample(name: "roles under load: call p50, \(who)", perOp: l.p50), ideal, note))
        out.append((Sample(name: "roles under load: call p95, \(who)", perOp: l.p95), ideal, note))
      }
      let p = polite[ci]
      let beside = Sample(
        name:
          "roles: a polite consumer's call p95 (1 thread) beside a flooding consumer (\(d.flood)), provider concurrency \(c)",
        perOp: p.besideP95)
      let alone = Sample(name: "the same consumer's call p95 alone, rounds alternated", perOp: p.aloneP95)
      let ratio = beside.median / alone.median
      let flood =
        "its wait for the handler p95 \(human(median(p.aloneWaitP95))) alone, \(human(median(p.besideWaitP95))) beside; calls of the flood entering the handler ahead of one of its calls p50 \(String(format: "%.0f", median(p.aheadP50))), p95 \(String(format: "%.0f", median(p.aheadP95))), at most \(p.aheadMax.max().map { "\(Int($0))" } ?? "-"); CPUs busy \(percent(median(p.aloneCPUs))) alone, \(percent(median(p.besideCPUs))) beside; the flood answered \(perSecond(median(p.floodOK))) calls/s, BUSY \(perSecond(median(p.floodBusy)))/s, each answered in p50 \(human(median(p.floodBusyP50))), p95 \(human(median(p.floodBusyP95))); the polite consumer's calls not answered OK: \(Int(p.politeFailed))"
      out.append(
        (
          beside, alone,
          "target ≤ \(Int(politeTarget))×: \(ratio <= politeTarget ? "met" : "missed"); \(flood); \(d.load)"
        ))
      out.append(
        (
          Sample(
            name: "roles: the polite consumer's call p50 beside the flood, provider concurrency \(c)",
            perOp: p.besideP50),
          Sample(name: "the same consumer's call p50 alone, rounds alternated", perOp: p.aloneP50),
          flood
        ))
    }
    return out
  }

  /// "1.23 ms (1.10–1.40)"
  static func spread(_ v: [Double], _ format: (Double) -> String = human) -> String {
    let s = Sample(name: "", perOp: v)
    return v.isEmpty ? "-" : "\(format(s.median)) (\(format(s.min))–\(format(s.max)))"
  }

  /// The medians of each part: "52 / 12 / 38 µs".
  static func cpuSplit(_ v: [CPU]) -> String {
    let parts = [median(v.map(\.host)), median(v.map(\.provider)), median(v.map(\.consumers))]
    return parts.map { String(format: "%.0f", $0 / 1000) }.joined(separator: " / ") + " µs"
  }

  static func perSecond(_ v: Double) -> String { v.isFinite ? String(format: "%.0f", v) : "-" }

  static func table(_ loads: [[Load]], _ polite: [Politeness], _ d: Describe) -> String {
    var out = """
      roles under load (issue 39): a shared_database provider whose handler sleeps \(workUS) µs \
      (clock_nanosleep), serving with the concurrency it declares, and consumer modules of \
      \(threadsPerConsumer) threads each calling it back to back, every module in its own worker; \
      medians over \(d.rounds) round(s) of \(d.windowMS) ms windows (min–max), a fresh host per \
      concurrency and round, rounds alternated; ideal = the handler's own mean time in the same window \
      (calls/s: min(concurrency, calls outstanding) / it; latency: max(1, outstanding / concurrency) × it); \
      CPU = the host's process and its workers over the window (busy: of all the machine's CPUs; \
      the busiest thread: of one CPU); \(d.load)

      | provider concurrency | consumer modules × threads | calls/s | ideal calls/s | ratio | call p50 | call p95 | ideal latency | handler p50 | most in flight | CPUs busy | CPU a call: host / provider / consumers | provider's busiest thread | BUSY / TIMEOUT / other |
      | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |

      """
    for (ci, c) in concurrencies.enumerated() {
      for (ki, k) in consumerCounts.enumerated() {
        let l = loads[ci][ki]
        let ratio = median(l.throughput) / median(l.idealThroughput)
        let cells = [
          "\(c)", "\(k) × \(threadsPerConsumer)", spread(l.throughput, perSecond),
          perSecond(median(l.idealThroughput)),
          Report.ratio(ratio), spread(l.p50), spread(l.p95), human(median(l.idealLatency)),
          human(median(l.handler)),
          "\(Int(l.peak.max() ?? 0))", percent(median(l.busyCPUs)), cpuSplit(l.cpuPerCall),
          percent(median(l.busiestShare)),
          "\(Int(l.busy)) / \(Int(l.timeouts)) / \(Int(l.other))",
        ]
        out += "| " + cells.joined(separator: " | ") + " |\n"
      }
    }
    out += """

      a polite consumer (1 thread, one call at a time) alone and beside a flooding consumer (\(d.flood)) \
      of the same provider, the two windows of a round in alternated order; target: p95 beside ≤ \
      \(Int(politeTarget))× p95 alone. Its wait = sent → the handler's entry, and the flood's calls \
      ahead = those that entered the handler after it was sent and before it, both seen by the provider; \
      a BUSY answer = how long a call of the flood answered BUSY took, seen by the flood

      | provider concurrency | p50 alone | p50 beside the flood | p95 alone | p95 beside the flood | p95 ratio | met? | its wait p95 alone / beside | flood calls ahead p50 / p95 / max | CPUs busy alone / beside | flood calls/s | flood BUSY/s | a BUSY answer p50 / p95 | polite not OK |
      | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |

      """
    for (ci, c) in concurrencies.enumerated() {
      let p = polite[ci]
      let ratio = median(p.besideP95) / median(p.aloneP95)
      let cells = [
        "\(c)", spread(p.aloneP50), spread(p.besideP50), spread(p.aloneP95), spread(p.besideP95),
        Report.ratio(ratio),
        ratio <= politeTarget ? "yes" : "**no**",
        "\(human(median(p.aloneWaitP95))) / \(human(median(p.besideWaitP95)))",
        "\(String(format: "%.0f", median(p.aheadP50))) / \(String(format: "%.0f", median(p.aheadP95))) / \(p.aheadMax.max().map { "\(Int($0))" } ?? "-")",
        "\(percent(median(p.aloneCPUs))) / \(percent(median(p.besideCPUs)))", perSecond(median(p.floodOK)),
        perSecond(median(p.floodBusy)), "\(human(median(p.floodBusyP50))) / \(human(median(p.floodBusyP95)))",
        "\(Int(p.politeFailed))",
      ]
      out += "| " + cells.joined(separator: " | ") + " |\n"
    }
    return out
  }

  // MARK: - Modules

  /// One directory per concurrency: its provider, and the same 16 consumers (built once).
  static func install(_ root: String, include: String) throws {
    let first = root + "/c\(concurrencies[0])"
    for c in concurrencies {
      let dir = root + "/c\(c)"
      for sub in ["/plugins", "/manifests"] {
        try FileManager.default.createDirectory(atPath: dir + sub, withIntermediateDirectories: true)
      }
      try Fixtures.install(
        provider(concurrency: c), in: dir, include: include, capabilities: ["shared_database"],
        extra: NeighbourModules.provides)
    }
    for i in 0..<consumers {
      let m = consumer(i)
      try Fixtures.install(
        m, in: first, include: include, capabilities: ["shared_database"], extra: NeighbourModules.consumes)
      for c in concurrencies.dropFirst() {
        for file in ["/plugins/\(m.entry).so", "/manifests/\(m.entry).json"] {
          try FileManager.default.copyItem(atPath: first + file, toPath: root + "/c\(c)" + file)
        }
      }
    }
    // Fixtures.build does not report cc's status; a module that did not build would measure nothing.
    for c in concurrencies {
      let dir = root + "/c\(c)"
      for name in try FileManager.default.contentsOfDirectory(atPath: dir + "/manifests") {
        let so = dir + "/plugins/" + name.replacingOccurrences(of: ".json", with: ".so")
        guard access(so, R_OK) == 0 else { throw NeighbourBench.NeighbourBenchError.build(so) }
      }
    }
  }

  /// What both kinds of module share: the clock, the bench's order (the file go), the result file.
  static let common = """
    #include <errno.h>
    #include <pthread.h>
    #include <stddef.h>
    #include <stdint.h>
    #include <stdlib.h>
    #include <string.h>
    #include <unistd.h>
    #define MAX_SAMPLES (1u << 18)
    static const forsetti_host *h;
    static const forsetti_role_service *role;
    static uint64_t samples[MAX_SAMPLES];
    static uint64_t nsamples;
    struct order { uint64_t round, start, record, end, threads, pause_us; };
    static uint64_t now_ns(void) {
      struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
      return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
    }
    static void sleep_until(uint64_t ns) {
      struct timespec t = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR) {}
    }
    static void sandbox_file(char *out, size_t cap, const char *name) {
      snprintf(out, cap, "%s/%s", h->sandbox_path, name);
    }
    static int read_order(uint64_t last, struct order *o) {
      char path[4096]; sandbox_file(path, sizeof path, "go");
      FILE *f = fopen(path, "r");
      if (!f) return 0;
      unsigned long long v[6];
      int n = fscanf(f, "%llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]);
      fclose(f);
      if (n != 6 || v[0] <= last) return 0;
      o->round = v[0]; o->start = v[1]; o->record = v[2]; o->end = v[3]; o->threads = v[4]; o->pause_us = v[5];
      return 1;
    }
    /* result-ROUND: [nhead, head..., n, samples..., nextra, extra...], through a temporary file. */
    static void write_result(uint64_t round, const uint64_t *head, uint64_t nhead, const uint64_t *extra,
                             uint64_t nextra) {
      char name[64], path[4096], tmp[4200];
      snprintf(name, sizeof name, "result-%llu", (unsigned long long)round);
      sandbox_file(path, sizeof path, name);
      snprintf(tmp, sizeof tmp, "%s.tmp", path);
      FILE *f = fopen(tmp, "wb");
      if (!f) { h->log(FORSETTI_LOG_ERROR, "bench: cannot write a result"); return; }
      uint64_t n = __atomic_load_n(&nsamples, __ATOMIC_ACQUIRE);
      if (n > MAX_SAMPLES) n = MAX_SAMPLES;
      fwrite(&nhead, sizeof nhead, 1, f);
      fwrite(head, sizeof *head, nhead, f);
      fwrite(&n, sizeof n, 1, f);
      fwrite(samples, sizeof *samples, n, f);
      fwrite(&nextra, sizeof nextra, 1, f);
      if (nextra && extra) fwrite(extra, sizeof *extra, nextra, f);
      fclose(f);
      rename(tmp, path);
    }
    static void serve_order(const struct order *o);
    static void *control(void *arg) {
      (void)arg;
      uint64_t last = 0;
      for (;;) {
        struct order o;
        if (read_order(last, &o)) { last = o.round; serve_order(&o); }
        struct timespec t = { 0, 5000000L };
        nanosleep(&t, NULL);
      }
      return NULL;
    }
    /* The control thread, then the file ready the bench waits for. */
    static int start_control(void) {
      pthread_t t;
      if (pthread_create(&t, NULL, control, NULL) != 0) return -1;
      pthread_detach(t);
      char path[4096]; sandbox_file(path, sizeof path, "ready");
      FILE *f = fopen(path, "w");
      if (!f) return -1;
      fclose(f);
      return 0;
    }
    """

  /// The provider: its handler sleeps `workUS` µs from its entry and echoes the request; it
  /// serves with `concurrency` through `serve_concurrently` (ABI 1.3). Over a window it keeps
  /// each handler's time (entry to return) and the most calls in its handler at once.
  static func provider(concurrency: Int) -> Fixtures.Module {
    Fixtures.module(
      id: providerID, entry: "rl_provider_entry",
      start: """
        h = host;
        role = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
        if (!role) return FORSETTI_ERR_START_FAILED;
        forsetti_status st;
        if (role->struct_size >= offsetof(forsetti_role_service, serve_concurrently) + sizeof role->serve_concurrently
            && role->serve_concurrently)
          st = role->serve_concurrently(work, NULL, CONCURRENCY);
        else if (CONCURRENCY == 1)
          st = role->serve(work, NULL);
        else {
          host->log(FORSETTI_LOG_ERROR, "bench: this host has no serve_concurrently (ABI 1.3)");
          return FORSETTI_ERR_START_FAILED;
        }
        if (st != FORSETTI_OK) {
          host->log(FORSETTI_LOG_ERROR, "bench: serve_concurrently refused");
          return FORSETTI_ERR_START_FAILED;
        }
        return start_control() == 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
        """,
      prelude: common + "\n" + """
        #define CONCURRENCY \(concurrency)u
        #define WORK_NS \(workUS * 1000)ull
        #define POLITE_ID "\(consumerID(0))"
        #define MAX_POLITE (1u << 15)
        #define RING 1024u
        static uint64_t win_record, win_end, inflight, peak, handled;
        /* The entry times of the latest calls from anyone but the polite consumer. */
        static uint64_t others[RING], nothers;
        /* Per call of the polite consumer: its wait (send → handler entry) and how many calls of
         * others entered the handler after it was sent and before it did. */
        static uint64_t polite[2 * MAX_POLITE], npolite;
        static forsetti_status work(void *c, const char *caller, const char *method, const void *req,
                                    size_t len, void *resp, size_t cap, size_t *rlen) {
          (void)c; (void)method;
          uint64_t a = now_ns();
          uint64_t in = __atomic_add_fetch(&inflight, 1, __ATOMIC_ACQ_REL);
          uint64_t record = __atomic_load_n(&win_record, __ATOMIC_ACQUIRE);
          uint64_t end = __atomic_load_n(&win_end, __ATOMIC_ACQUIRE);
          if (a >= record && a <= end) {
            uint64_t p = __atomic_load_n(&peak, __ATOMIC_RELAXED);
            while (in > p && !__atomic_compare_exchange_n(&peak, &p, in, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
          }
          if (strcmp(caller, POLITE_ID) != 0) {
            uint64_t i = __atomic_fetch_add(&nothers, 1, __ATOMIC_RELAXED);
            __atomic_store_n(&others[i % RING], a, __ATOMIC_RELAXED);
          } else if (len == sizeof(uint64_t) && a >= record && a <= end) {
            uint64_t sent, ahead = 0;
            memcpy(&sent, req, sizeof sent);
            for (unsigned k = 0; k < RING; k++) {
              uint64_t t = __atomic_load_n(&others[k], __ATOMIC_RELAXED);
              if (t > sent && t <= a) ahead++;
            }
            uint64_t i = __atomic_fetch_add(&npolite, 1, __ATOMIC_RELAXED);
            if (i < MAX_POLITE) { polite[2 * i] = a > sent ? a - sent : 0; polite[2 * i + 1] = ahead; }
          }
          sleep_until(a + WORK_NS);
          forsetti_status st = FORSETTI_OK;
          if (len > cap) st = FORSETTI_ERR_BUFFER_TOO_SMALL;
          else { memcpy(resp, req, len); *rlen = len; }
          __atomic_sub_fetch(&inflight, 1, __ATOMIC_ACQ_REL);
          uint64_t b = now_ns();
          if (b >= record && b <= end) {
            __atomic_add_fetch(&handled, 1, __ATOMIC_RELAXED);
            uint64_t i = __atomic_fetch_add(&nsamples, 1, __ATOMIC_ACQ_REL);
            if (i < MAX_SAMPLES) samples[i] = b - a;
          }
          return st;
        }
        static void serve_order(const struct order *o) {
          __atomic_store_n(&win_end, 0, __ATOMIC_RELEASE);
          __atomic_store_n(&peak, 0, __ATOMIC_RELAXED);
          __atomic_store_n(&handled, 0, __ATOMIC_RELAXED);
          __atomic_store_n(&nsamples, 0, __ATOMIC_RELEASE);
          __atomic_store_n(&npolite, 0, __ATOMIC_RELEASE);
          __atomic_store_n(&win_record, o->record, __ATOMIC_RELEASE);
          __atomic_store_n(&win_end, o->end, __ATOMIC_RELEASE);
          /* Calls answered by the end have returned from the handler 20 ms after it. */
          sleep_until(o->end + 20000000ull);
          uint64_t head[4] = { __atomic_load_n(&handled, __ATOMIC_ACQUIRE), __atomic_load_n(&peak, __ATOMIC_ACQUIRE),
                               CONCURRENCY, 0 };
          uint64_t n = __atomic_load_n(&npolite, __ATOMIC_ACQUIRE);
          write_result(o->round, head, 4, polite, 2 * (n < MAX_POLITE ? n : MAX_POLITE));
        }
        """)
  }

  /// A consumer: on each order, `threads` threads call the role back to back from `start` to
  /// `end` ("work", 8 bytes each way), keeping the latency of every call answered OK between
  /// `record` and `end` and counting the others by status. After BUSY a thread waits `pause_us`
  /// (0: retries at once, as a flood would); after any other failure 1 ms, so as not to spin.
  static func consumer(_ i: Int) -> Fixtures.Module {
    Fixtures.module(
      id: consumerID(i), entry: "rl_c\(i)_entry",
      start: """
        h = host;
        role = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
        if (!role) return FORSETTI_ERR_START_FAILED;
        return start_control() == 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
        """,
      prelude: common + "\n" + """
        #define MAX_THREADS 64
        static struct order cur;
        static uint64_t ok, busy, timeouts, other;
        /* How long each BUSY answer took. */
        static uint64_t busy_ns[MAX_SAMPLES], nbusy_ns;
        static void *caller(void *arg) {
          (void)arg;
          char out[16]; size_t n = 0;
          sleep_until(cur.start);
          for (;;) {
            uint64_t a = now_ns();
            if (a >= cur.end) break;
            forsetti_status st = role->call("work", &a, sizeof a, out, sizeof out, &n);
            uint64_t b = now_ns();
            int counted = b >= cur.record && b <= cur.end;
            if (st == FORSETTI_OK) {
              if (counted) {
                __atomic_add_fetch(&ok, 1, __ATOMIC_RELAXED);
                uint64_t i = __atomic_fetch_add(&nsamples, 1, __ATOMIC_RELAXED);
                if (i < MAX_SAMPLES) samples[i] = b - a;
              }
              continue;
            }
            if (counted)
              __atomic_add_fetch(st == FORSETTI_ERR_BUSY ? &busy : st == FORSETTI_ERR_TIMEOUT ? &timeouts : &other, 1,
                                 __ATOMIC_RELAXED);
            if (counted && st == FORSETTI_ERR_BUSY) {
              uint64_t i = __atomic_fetch_add(&nbusy_ns, 1, __ATOMIC_RELAXED);
              if (i < MAX_SAMPLES) busy_ns[i] = b - a;
            }
            uint64_t pause_us = st == FORSETTI_ERR_BUSY ? cur.pause_us : st == FORSETTI_ERR_TIMEOUT ? 0 : 1000;
            if (pause_us) sleep_until(now_ns() + pause_us * 1000ull);
          }
          return NULL;
        }
        static void serve_order(const struct order *o) {
          cur = *o;
          ok = busy = timeouts = other = nsamples = nbusy_ns = 0;
          uint64_t threads = o->threads < 1 ? 1 : o->threads > MAX_THREADS ? MAX_THREADS : o->threads;
          pthread_t t[MAX_THREADS];
          uint64_t started = 0;
          for (uint64_t i = 0; i < threads; i++)
            if (pthread_create(&t[started], NULL, caller, NULL) == 0) started++;
          for (uint64_t i = 0; i < started; i++) pthread_join(t[i], NULL);
          uint64_t head[5] = { ok, busy, timeouts, other, started };
          write_result(o->round, head, 5, busy_ns, nbusy_ns < MAX_SAMPLES ? nbusy_ns : MAX_SAMPLES);
        }
        """)
  }
}
