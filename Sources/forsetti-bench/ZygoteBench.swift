import ForsettiBinary
import ForsettiCore
import ForsettiRuntime
import Foundation
import Glibc

/// Worker start and memory with the zygote and without (issue 18): alternated rounds, same run.
enum ZygoteBench {
  static func settings(zygote: Bool) -> ExecutionMode {
    var s = IsolationSettings(workerExecutable: IsolationSettings.defaultWorker)
    s.startTimeout = 60
    s.zygote = zygote
    return .isolated(s)
  }

  /// ns from asking for a worker to its first answer, forked by the zygote and spawned, and the
  /// C floor's spawn of /bin/true, alternated round by round (one uncounted warm-up round
  /// each); and why the zygote's workers were spawned after all, if they were.
  static func processStart(rounds: Int, floors: Floors) -> (
    forked: [Double], spawned: [Double], floor: [Double], unavailable: String?
  ) {
    let forking = WorkerStartProbe(executable: IsolationSettings.defaultWorker, zygote: true)
    let spawning = WorkerStartProbe(executable: IsolationSettings.defaultWorker, zygote: false)
    _ = forking.firstAnswer()
    _ = spawning.firstAnswer()
    var forked: [Double] = []
    var spawned: [Double] = []
    var floor: [Double] = []
    _ = floors.spawnTrue(1)
    for _ in 0..<rounds {
      if let t = forking.firstAnswer() { forked.append(t) }
      if let t = spawning.firstAnswer() { spawned.append(t) }
      if let t = floors.spawnTrue(1) { floor.append(t) }
    }
    return (forked, spawned, floor, forking.zygoteUnavailable)
  }

  /// ns for each start of the one module in `dir` by a host already running (its zygote warm):
  /// enabled, started, disabled, stopped, round after round; `zygote` and spawned alternated,
  /// each host on its own copy of the module. The first start of each (the zygote's own start)
  /// is not counted.
  static func warmStarts(_ dirs: (forked: String, spawned: String), id: String, rounds: Int) throws -> (
    forked: [Double], spawned: [Double]
  ) {
    var hosts: [(ModuleManager, [ModuleJudgement], BinaryIndex)] = []
    for (dir, zygote) in [(dirs.forked, true), (dirs.spawned, false)] {
      let (judgements, index) = try Fixtures.judge(dir)
      let m = ModuleManager(
        environment: HostEnvironment(stateDirectory: dir + "/state", log: MemoryLogSink()),
        mode: settings(zygote: zygote))
      m.activate(judgements, index: index)
      hosts.append((m, judgements, index))
    }
    defer { for (m, _, _) in hosts { m.stopAll() } }
    var times: [[Double]] = [[], []]
    let off = [id: DesiredState.Inactive(reason: .moduleDisabled, why: "benchmark round")]
    for round in 0..<rounds {
      for k in round % 2 == 0 ? [0, 1] : [1, 0] {
        let (m, judgements, index) = hosts[k]
        let approvals = ApprovalLedger(approveAll: true)
        _ = m.reconcile(
          DesiredState(judgements: judgements, index: index, inactive: off, approvals: approvals), quiet: true
        )
        let t0 = Clock.ns()
        _ = m.reconcile(DesiredState(judgements: judgements, index: index, approvals: approvals), quiet: true)
        let t = Double(Clock.ns() - t0)
        if m.records.first(where: { $0.moduleID == id })?.state == .started { times[k].append(t) }
      }
    }
    return (times[0], times[1])
  }

  /// A process's proportional and resident memory in bytes (`smaps_rollup`).
  static func memory(_ pid: Int32) -> (pss: Double, rss: Double) {
    guard let s = try? String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8) else {
      return (.nan, .nan)
    }
    func field(_ name: String) -> Double {
      guard let line = s.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else {
        return .nan
      }
      return (Double(line.split(separator: " ").dropFirst().first ?? "") ?? .nan) * 1024
    }
    return (field("Pss"), field("Rss"))
  }

  /// `count` trivial modules installed in `dir` (compiled once each).
  static func install(count: Int, in dir: String, include: String) throws {
    try? FileManager.default.createDirectory(atPath: dir + "/plugins", withIntermediateDirectories: true)
    try? FileManager.default.createDirectory(atPath: dir + "/manifests", withIntermediateDirectories: true)
    for n in 0..<count {
      let m = Fixtures.module(id: "com.bench.many\(n)", entry: "many\(n)_entry", start: "return FORSETTI_OK;")
      try Fixtures.install(m, in: dir, include: include)
    }
  }

  /// Every module of `dir` started in its own worker at once; each worker's PSS and RSS, then
  /// all stopped. Also the zygote's own PSS (nil without one).
  static func manyWorkers(_ dir: String, count: Int, zygote: Bool) throws -> (
    pss: [Double], rss: [Double], started: Int
  ) {
    let m = try Fixtures.start(dir, log: MemoryLogSink(), mode: settings(zygote: zygote))
    defer { m.stopAll() }
    var pss: [Double] = []
    var rss: [Double] = []
    for n in 0..<count {
      guard let pid = m.workerPID("com.bench.many\(n)") else { continue }
      let (p, r) = memory(pid)
      pss.append(p)
      rss.append(r)
    }
    return (pss, rss, pss.count)
  }
}
