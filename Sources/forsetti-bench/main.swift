import ForsettiBinary
import ForsettiCore
import ForsettiRuntime
import Foundation
import Glibc

// The benchmark: each figure is a median over repeated rounds with min–max, next to a baseline
// measured in the same run on the same machine. Fixtures are generated into a temporary
// directory; nothing is committed. Run through scripts/bench (release build).

let args = Array(CommandLine.arguments.dropFirst())
if args.first == "--echo-child" { exit(EchoChild.run()) }
let json = args.contains("--json")
let quick = args.contains("--quick")
let rounds = quick ? 5 : 15

let packageRoot: String = {
  var url = URL(fileURLWithPath: #filePath)
  for _ in 0..<3 { url.deleteLastPathComponent() }
  return url.path
}()
let include = packageRoot + "/Sources/CForsetti/include"
let work = NSTemporaryDirectory() + "forsetti-bench-\(getpid())"
try? FileManager.default.createDirectory(atPath: work + "/plugins", withIntermediateDirectories: true)
try? FileManager.default.createDirectory(atPath: work + "/manifests", withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: work) }

var rows: [(figure: Sample, baseline: Sample?, note: String)] = []

// 1. Host-call round trip through a worker vs a raw SOCK_SEQPACKET round trip to a process.
let calls = quick ? 500 : 2000
let caller = Fixtures.module(
  id: "com.bench.caller", entry: "caller_entry",
  start: """
    const forsetti_events *e = host->resolve(FORSETTI_SERVICE_EVENTS);
    char line[64];
    for (int r = 0; r < \(rounds); r++) {
      struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
      for (int i = 0; i < \(calls); i++) e->publish("bench.nobody", "", 0);
      clock_gettime(CLOCK_MONOTONIC, &b);
      double ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / \(calls).0;
      snprintf(line, sizeof line, "rt %.1f", ns); host->log(FORSETTI_LOG_INFO, line);
    }
    return FORSETTI_OK;
    """)
try Fixtures.install(caller, in: work, include: include)
let log = MemoryLogSink()
var settings = IsolationSettings(workerExecutable: IsolationSettings.defaultWorker)
settings.startTimeout = 60
let mode = ExecutionMode.isolated(settings)
let m1 = try Fixtures.start(work, log: log, mode: mode)
let hostCall = Sample(
  name: "host call through worker (publish, no subscriber)",
  perOp: log.all.compactMap { $0.message.hasPrefix("rt ") ? Double($0.message.dropFirst(3)) : nil })
m1.stopAll()
let raw = Sample(
  name: "raw SOCK_SEQPACKET round trip", perOp: EchoChild.roundTrips(rounds: rounds, ops: calls))
rows.append((hostCall, raw, "the worker path adds a host reader thread and a worker wake-up"))

// 2. Worker spawn: spawn + confine + load + start of a trivial module, vs posix_spawn of /bin/true.
try? FileManager.default.removeItem(atPath: work + "/manifests/caller_entry.json")
let trivial = Fixtures.module(id: "com.bench.trivial", entry: "trivial_entry", start: "return FORSETTI_OK;")
try Fixtures.install(trivial, in: work, include: include)
var spawn: [Double] = []
var rss: [Double] = []
for _ in 0..<(quick ? 5 : 20) {
  let t0 = Clock.ns()
  let m = try Fixtures.start(work, log: MemoryLogSink(), mode: mode)
  spawn.append(Double(Clock.ns() - t0))
  if let pid = m.workerPID("com.bench.trivial") { rss.append(Fixtures.rssKiB(pid) * 1024) }
  m.stopAll()
}
let spawnTrue = (0..<(quick ? 5 : 20)).map { _ in Double(Fixtures.spawnTrue()) }
rows.append(
  (
    Sample(name: "worker start (spawn, confine, load, start)", perOp: spawn),
    Sample(name: "posix_spawn + wait of /bin/true", perOp: spawnTrue), "includes gating the manifest"
  ))
rows.append((Sample(name: "worker resident memory (bytes)", perOp: rss), nil, "VmRSS after start"))

// 3. Hot reload: file event → new start returned, vs a raw copy + dlopen + dlsym of the same file.
for (label, reloadMode) in [("in-process", ExecutionMode.inProcess), ("isolated", mode)] {
  let dir = work + "/reload-\(label)"
  try? FileManager.default.createDirectory(atPath: dir + "/plugins", withIntermediateDirectories: true)
  try? FileManager.default.createDirectory(atPath: dir + "/manifests", withIntermediateDirectories: true)
  let hot = Fixtures.module(id: "com.bench.hot", entry: "hot_entry", start: "return FORSETTI_OK;")
  try Fixtures.install(hot, in: dir, include: include)
  let manager = try Fixtures.start(dir, log: MemoryLogSink(), mode: reloadMode, versionCopies: true)
  let events = EventTimes()
  let watcher = try FileWatcher(directories: [dir + "/plugins"]) { _, at in events.post(at) }
  var latencies: [Double] = []
  var raws: [Double] = []
  for n in 0..<(quick ? 5 : 15) {
    // A distinct build each time (the copy is content-named), renamed into place.
    let variant = Fixtures.module(
      id: "com.bench.hot", entry: "hot_entry", start: "volatile int v = \(n); (void)v; return FORSETTI_OK;")
    try Fixtures.build(variant, to: dir + "/next.so", include: include)
    rename(dir + "/next.so", dir + "/plugins/hot_entry.so")
    guard let at = events.next() else { continue }
    let (judgements, index) = try Fixtures.judge(dir)
    let reports = manager.reload(
      judgements: judgements, index: index, changed: [dir + "/plugins/hot_entry.so"],
      approvals: .init(approveAll: true),
      grace: 0, since: at)
    if let r = reports.first, r.outcome == .reloaded {
      latencies.append(
        Double(r.duration.components.attoseconds / 1_000_000_000) + Double(r.duration.components.seconds)
          * 1e9)
    }
    raws.append(
      Double(
        Fixtures.rawCopyLoad(
          dir + "/plugins/hot_entry.so", symbol: "hot_entry", scratch: dir + "/raw-\(n).so")))
  }
  withExtendedLifetime(watcher) {}
  manager.stopAll()
  rows.append(
    (
      Sample(name: "hot reload, \(label) (file event → new start returned)", perOp: latencies),
      Sample(name: "copy + dlopen + dlsym of the same file", perOp: raws),
      "re-gates every manifest and re-inspects every binary first"
    ))
}

Report.print(rows, json: json)
