import Foundation
import Glibc

/// Issue 25: a healthy module's host calls (`events.publish`, timed in the module) and event
/// deliveries (publisher → subscriber, the send time in the payload), alone and beside each
/// hostile neighbour, under a real `forsetti-host run` with isolated workers, as root and as
/// uid 65534. Each neighbour's run is paired with a run alone in the same round, the two in
/// alternated order; figures are medians over rounds of each run's p50 and p95.
enum NeighbourBench {
  /// A fixture module did not compile.
  enum NeighbourBenchError: Error, CustomStringConvertible {
    case build(String)
    var description: String {
      switch self {
      case .build(let so): "neighbours: \(so) was not built (cc failed)"
      }
    }
  }

  typealias Row = (figure: Sample, baseline: Sample?, note: String)

  /// The memory limit every worker runs under (`--memory-limit`), which the hog fills to 90%.
  static let memoryLimitMiB = 512
  static let warmupMS = 500
  static let targetP50 = 2.0
  static let targetP95 = 3.0

  /// A neighbour: what is installed beside the healthy publisher and subscriber.
  struct Neighbour {
    var name: String
    var modules: [(module: Fixtures.Module, capabilities: [String], extra: String)]
    /// The healthy module consumes the role (and calls it from a second thread).
    var consumesRole = false
  }

  /// One run's figures, in ns.
  struct Figures {
    var callP50 = Double.nan
    var callP95 = Double.nan
    var deliveryP50 = Double.nan
    var deliveryP95 = Double.nan
    var calls = 0
    var deliveries = 0
    /// What each neighbour module did, from its ops.txt: "ID: N ops/s".
    var work = ""
  }

  struct Result {
    var identity: String
    var neighbour: String
    var alone: [Figures] = []
    var beside: [Figures] = []
  }

  /// Every neighbour, or those whose name contains FORSETTI_BENCH_NEIGHBOUR (to look at one).
  static var chosen: [Neighbour] {
    guard let part = ProcessInfo.processInfo.environment["FORSETTI_BENCH_NEIGHBOUR"] else { return all }
    return all.filter { $0.name.contains(part) }
  }

  static let all: [Neighbour] = [
    Neighbour(name: "CPU spin, 16 threads", modules: [(NeighbourModules.cpu, [], "")]),
    Neighbour(
      name: "memory: 90% of --memory-limit, touched in a loop",
      modules: [(NeighbourModules.memory(limitMiB: memoryLimitMiB), [], "")]),
    Neighbour(name: "log flood, 4 threads", modules: [(NeighbourModules.logFlood, [], "")]),
    Neighbour(
      name: "publish flood, nobody listening",
      modules: [(NeighbourModules.publishFlood("com.bench.flood", type: "bench.flood"), [], "")]),
    Neighbour(
      name: "publish flood to the healthy subscriber",
      modules: [(NeighbourModules.publishFlood("com.bench.floodtick", type: "bench.tick"), [], "")]),
    Neighbour(
      name: "hung provider the healthy module consumes",
      modules: [(NeighbourModules.hungProvider, ["shared_database"], NeighbourModules.provides)],
      consumesRole: true),
    Neighbour(
      name: "hung provider it does not consume (4 hostile callers)",
      modules: [
        (NeighbourModules.hungProvider, ["shared_database"], NeighbourModules.provides),
        (NeighbourModules.hungCaller, ["shared_database"], NeighbourModules.consumes),
      ]),
  ]

  static func run(work: String, include: String, rounds: Int, windowMS: Int) throws -> (
    rows: [Row], table: String
  ) {
    let host = PeerBench.ownDirectory() + "/forsetti-host"
    guard access(host, X_OK) == 0, access(PeerBench.ownDirectory() + "/forsetti-worker", X_OK) == 0 else {
      progress("neighbours: no forsetti-host or forsetti-worker beside the bench (scripts/bench builds them)")
      return ([], "")
    }
    let root = work + "/neighbours"
    let alone = root + "/alone"
    try layout(alone, include: include, neighbour: nil, windowMS: windowMS)
    var dirs: [String] = []
    let neighbours = chosen
    for (n, neighbour) in neighbours.enumerated() {
      let dir = root + "/n\(n)"
      try layout(dir, include: include, neighbour: neighbour, windowMS: windowMS)
      dirs.append(dir)
    }
    sync()
    let loadBefore = loadAverage()
    var identities = [(name: "root", unprivileged: false)]
    if geteuid() == 0 {
      identities.append((name: "uid 65534", unprivileged: true))
    } else {
      progress("neighbours: not root, so the unprivileged runs are skipped")
    }
    var results: [Result] = []
    var runs = 0
    for identity in identities
    where ProcessInfo.processInfo.environment["FORSETTI_BENCH_AS"].map({ identity.name.hasPrefix($0) })
      ?? true
    {
      if identity.unprivileged {
        // The host as 65534 reads its manifests and plugins and owns its state.
        _ = PeerBench.spawn("/bin/chown", ["-R", "65534:65534", root], captureOutput: false)
      }
      var mine = neighbours.map { Result(identity: identity.name, neighbour: $0.name) }
      for round in 0..<rounds {
        for (n, neighbour) in neighbours.enumerated() {
          progress("neighbours: \(identity.name), round \(round + 1)/\(rounds): \(neighbour.name)")
          let order = round % 2 == 0 ? [alone, dirs[n]] : [dirs[n], alone]
          for dir in order {
            runs += 1
            let figures = once(
              host: host, dir: dir, state: root + "/state-\(runs)", unprivileged: identity.unprivileged,
              windowMS: windowMS, label: dir == alone ? "alone" : neighbour.name,
              neighbourIDs: dir == alone ? [] : neighbour.modules.map(\.module.id))
            if dir == alone { mine[n].alone.append(figures) } else { mine[n].beside.append(figures) }
          }
        }
      }
      results += mine
    }
    let load = "load average \(loadBefore) before, \(loadAverage()) after"
    return (rows(results, load: load), table(results, rounds: rounds, windowMS: windowMS, load: load))
  }

  /// Lays out manifests/ and plugins/ of one run: the healthy pair, and `neighbour`'s modules.
  static func layout(_ dir: String, include: String, neighbour: Neighbour?, windowMS: Int) throws {
    for sub in ["/plugins", "/manifests"] {
      try FileManager.default.createDirectory(atPath: dir + sub, withIntermediateDirectories: true)
    }
    let consumes = neighbour?.consumesRole ?? false
    try Fixtures.install(
      NeighbourModules.healthy(warmupMS: warmupMS, windowMS: windowMS, callsRole: consumes), in: dir,
      include: include, capabilities: consumes ? ["shared_database"] : [],
      extra: consumes ? NeighbourModules.consumes : "")
    try Fixtures.install(NeighbourModules.listener, in: dir, include: include)
    for m in neighbour?.modules ?? [] {
      try Fixtures.install(m.module, in: dir, include: include, capabilities: m.capabilities, extra: m.extra)
    }
    // Fixtures.build does not report cc's status; a module that did not build would measure nothing.
    for name in (try FileManager.default.contentsOfDirectory(atPath: dir + "/manifests")) {
      let so = dir + "/plugins/" + name.replacingOccurrences(of: ".json", with: ".so")
      guard access(so, R_OK) == 0 else { throw NeighbourBenchError.build(so) }
    }
  }

  /// One `forsetti-host run` over `dir` until both healthy modules have written their samples.
  static func once(
    host: String, dir: String, state: String, unprivileged: Bool, windowMS: Int, label: String,
    neighbourIDs: [String]
  ) -> Figures {
    try? FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
    if unprivileged { chown(state, 65534, 65534) }
    defer { try? FileManager.default.removeItem(atPath: state) }
    // A publish may wait out a hung role call (FORSETTI_ROLE_CALL_TIMEOUT_MS, 10 s) before the last
    // tick and again before bench.done; 25 s covers both.
    let budget = Double(warmupMS + windowMS) / 1000 + 25
    var arguments = [
      host, "run", "--manifests", dir + "/manifests", "--plugins", dir + "/plugins", "--state", state,
      "--approve-all", "--for", String(Int(budget) + 10), "--memory-limit", String(memoryLimitMiB),
      // Only the stop after the window waits on it: a hung provider's worker is killed sooner.
      "--stop-timeout", "1",
    ]
    if unprivileged {
      arguments = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"] + arguments
    }
    let output = state + ".out"
    defer { try? FileManager.default.removeItem(atPath: output) }
    guard let pid = start(arguments, output: output) else {
      progress("neighbours: could not start \(arguments[0])")
      return Figures()
    }
    let callsFile = state + "/sandboxes/\(NeighbourModules.healthyID)/calls.txt"
    let deliveryFile = state + "/sandboxes/\(NeighbourModules.listenerID)/delivery.txt"
    let deadline = Clock.ns() + UInt64(budget * 1e9)
    var exited = false
    while Clock.ns() < deadline {
      if access(callsFile, R_OK) == 0 && access(deliveryFile, R_OK) == 0 { break }
      var status: Int32 = 0
      if waitpid(pid, &status, WNOHANG) == pid {
        exited = true
        break
      }
      usleep(20_000)
    }
    var f = Figures()
    f.work = neighbourIDs.map { id in
      let v = samples(state + "/sandboxes/\(id)/ops.txt")
      guard v.count == 3, v[0] > 0 else { return "\(id.split(separator: ".").last ?? ""): none" }
      let rate = String(format: "%.3g/s", v[0] / (v[1] / 1e9)) + (v[2] > 0 ? " over \(Int(v[2])) MiB" : "")
      return "\(id.split(separator: ".").last ?? ""): \(rate)"
    }.joined(separator: ", ")
    if !exited { stop(pid) }
    let calls = samples(callsFile).sorted()
    let deliveries = samples(deliveryFile).sorted()
    f.calls = calls.count
    f.deliveries = deliveries.count
    f.callP50 = percentile(calls, 0.50)
    f.callP95 = percentile(calls, 0.95)
    f.deliveryP50 = percentile(deliveries, 0.50)
    f.deliveryP95 = percentile(deliveries, 0.95)
    if calls.isEmpty || deliveries.isEmpty {
      let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
      let tail = text.split(separator: "\n").suffix(6).joined(separator: "\n    ")
      progress(
        "neighbours: \(label): \(calls.count) calls, \(deliveries.count) deliveries recorded; the host said:\n    \(tail)"
      )
    }
    return f
  }

  /// Starts `arguments` with standard output and error into `output`.
  static func start(_ arguments: [String], output: String) -> pid_t? {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    guard posix_spawn(&pid, arguments[0], &actions, nil, &argv, environ) == 0 else { return nil }
    return pid
  }

  /// SIGTERM, then SIGKILL if the host has not stopped within 20 s.
  static func stop(_ pid: pid_t) {
    kill(pid, SIGTERM)
    let deadline = Clock.ns() + 20_000_000_000
    var status: Int32 = 0
    while Clock.ns() < deadline {
      if waitpid(pid, &status, WNOHANG) == pid { return }
      usleep(20_000)
    }
    progress("neighbours: the host did not stop within 20 s of SIGTERM; killed")
    kill(pid, SIGKILL)
    waitpid(pid, &status, 0)
  }

  static func samples(_ path: String) -> [Double] {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
    return text.split(separator: "\n").compactMap { Double($0) }
  }

  /// Nearest rank of sorted `v`.
  static func percentile(_ v: [Double], _ p: Double) -> Double {
    guard !v.isEmpty else { return .nan }
    let rank = Int((p * Double(v.count)).rounded(.up))
    return v[min(max(rank, 1), v.count) - 1]
  }

  static func loadAverage() -> String {
    let text = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? ""
    return text.split(separator: " ").prefix(3).joined(separator: " ")
  }

  /// The four figures of a run, by name.
  static let metrics: [(name: String, value: @Sendable (Figures) -> Double, target: Double)] = [
    ("call p50", { $0.callP50 }, targetP50), ("call p95", { $0.callP95 }, targetP95),
    ("delivery p50", { $0.deliveryP50 }, targetP50), ("delivery p95", { $0.deliveryP95 }, targetP95),
  ]

  static func rows(_ results: [Result], load: String) -> [Row] {
    results.flatMap { r in
      metrics.map { m in
        let beside = Sample(
          name: "neighbours (\(r.identity)): \(m.name) beside \(r.neighbour)",
          perOp: values(r.beside, m.value))
        let alone = Sample(
          name: "neighbours (\(r.identity)): \(m.name) alone", perOp: values(r.alone, m.value))
        let met = beside.median / alone.median <= m.target
        return (beside, alone, "target ≤ \(Int(m.target))×: \(met ? "met" : "missed"); \(load)")
      }
    }
  }

  static func table(_ results: [Result], rounds: Int, windowMS: Int, load: String) -> String {
    var out = """
      neighbours: a healthy module's events.publish (call) and publish → subscriber delivery beside each \
      neighbour, forsetti-host run (isolated workers, --memory-limit \(memoryLimitMiB)); medians over \
      \(rounds) round(s) of each run's p50/p95, \(windowMS) ms of 1 kHz ticks a run, each run paired with one \
      alone; targets p50 ≤ 2×, p95 ≤ 3×; \(load)

      """
    out +=
      "| as | neighbour | call p50 | call p95 | delivery p50 | delivery p95 | calls/deliveries | met? | the neighbour at work |\n"
    out += "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
    for identity in Set(results.map(\.identity)).sorted() {
      let mine = results.filter { $0.identity == identity }
      let allAlone = mine.flatMap(\.alone)
      let aloneCells = metrics.map { m in human(Sample(name: "", perOp: values(allAlone, m.value)).median) }
      let aloneCounts = counts(allAlone)
      out +=
        "| \(identity) | alone (all pairs) | \(aloneCells.joined(separator: " | ")) | \(aloneCounts) | | |\n"
      for r in mine {
        var missed: [String] = []
        let cells = metrics.map { m -> String in
          let beside = Sample(name: "", perOp: values(r.beside, m.value)).median
          let alone = Sample(name: "", perOp: values(r.alone, m.value)).median
          let ratio = beside / alone
          if !(ratio <= m.target) { missed.append(m.name) }
          return "\(human(beside)) (\(Report.ratio(ratio)))"
        }
        let verdict = missed.isEmpty ? "yes" : "**no** (\(missed.joined(separator: ", ")))"
        out +=
          "| \(identity) | \(r.neighbour) | \(cells.joined(separator: " | ")) | \(counts(r.beside)) | \(verdict) | \(r.beside.last?.work ?? "") |\n"
      }
    }
    return out
  }

  /// One figure of each run that recorded it (a run that recorded nothing says so in progress).
  static func values(_ runs: [Figures], _ value: (Figures) -> Double) -> [Double] {
    runs.map(value).filter { !$0.isNaN }
  }

  /// Median samples per run: calls / deliveries.
  static func counts(_ runs: [Figures]) -> String {
    let c = Sample(name: "", perOp: runs.map { Double($0.calls) }).median
    let d = Sample(name: "", perOp: runs.map { Double($0.deliveries) }).median
    return String(format: "%.0f / %.0f", c, d)
  }
}
