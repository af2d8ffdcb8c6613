import ForsettiBinary
import ForsettiBridge
import ForsettiCore
import ForsettiRuntime
import Foundation
import Glibc

// The benchmark: each figure is a median over repeated rounds with min–max, next to a baseline
// measured in the same run on the same machine. Fixtures are generated into a temporary
// directory; nothing is committed. Run through scripts/bench (release build).

let args = Array(CommandLine.arguments.dropFirst())
if args.first == "--echo-ring" { exit(BenchmarkProbes.echo(ringFD: 4)) }
if args.contains("--help") || args.contains("-h") {
  print(BenchUsage.text)
  exit(0)
}
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
try? FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: work) }
let floors = Floors.build(packageRoot: packageRoot, work: work)

var rows: [(figure: Sample, baseline: Sample?, note: String)] = []
/// `--only gating` (or calls, roundtrip, peers …) runs one section, for profiling.
let only: String? = args.firstIndex(of: "--only").flatMap { $0 + 1 < args.count ? args[$0 + 1] : nil }
func section(_ name: String) -> Bool { only == nil || only == name }
func progress(_ s: String) { FileHandle.standardError.write(Data("bench: \(s)\n".utf8)) }

// 1. Discovery + gating of 1,000 modules vs a raw libelf scan of the same files.
if only == "micro" {
  let text = Array(
    """
    {"schemaVersion":"1.0","moduleID":"com.bench.g000001","displayName":"g",
     "moduleVersion":{"major":1,"minor":0,"patch":0},"moduleType":"service","supportedPlatforms":["linux"],
     "minForsettiVersion":{"major":0,"minor":1,"patch":0},"capabilitiesRequested":["storage"],"entryPoint":"entry_000001"}
    """.utf8)
  let parse = Clock.rounds(5, ops: 20000) { n in for _ in 0..<n { _ = try? JSONParser.parse(text) } }
  let value = (try? JSONParser.parse(text)) ?? .null
  let decode = Clock.rounds(5, ops: 20000) { n in for _ in 0..<n { _ = ManifestDecoder.decode(value) } }
  print(
    "parse \(Sample(name: "", perOp: parse).median) ns, decode \(Sample(name: "", perOp: decode).median) ns")
}
if only == "gating-loop" {
  // For profilers: gating only, repeated, after one generation.
  // FORSETTI_BENCH_GATING_DIR reuses fixtures generated before (valgrind cannot run cc).
  let dir = ProcessInfo.processInfo.environment["FORSETTI_BENCH_GATING_DIR"] ?? (work + "/gating")
  if !FileManager.default.fileExists(atPath: dir + "/manifests") {
    try GatingBench.generate(1000, in: dir, include: include)
  }
  let loops = Int(ProcessInfo.processInfo.environment["FORSETTI_BENCH_LOOPS"] ?? "") ?? 40
  // FORSETTI_BENCH_THREADS=1 profiles the one-thread row, the one compared with the floor.
  ParallelMap.limitWorkers(to: Int(ProcessInfo.processInfo.environment["FORSETTI_BENCH_THREADS"] ?? "") ?? 0)
  for _ in 0..<loops {
    _ = GatingBench.gate(dir)
    if ProcessInfo.processInfo.environment["FORSETTI_BENCH_DETAIL"] != nil {
      let count = (PlainFiles.names(in: dir + "/manifests") ?? []).count
      FileHandle.standardError.write(Data("floor \(Int(floors.gate(dir, count: count) ?? .nan))\n".utf8))
    }
  }
}
if section("gating") {
  progress("gating 1,000 modules")
  let gatingDir = work + "/gating"
  let many = quick ? 200 : 1000
  try GatingBench.generate(many, in: gatingDir, include: include)
  // Writeback of the fresh files would otherwise compete with the measurement.
  sync()
  _ = GatingBench.gate(gatingDir)  // warm the page cache for both sides
  // Rounds interleave the three measurements, so a machine that slows down mid-run (this VM's
  // speed drifts by 2× within an hour) weighs on all of them alike.
  var gating: [Double] = []
  var gatingOne: [Double] = []
  var floor: [Double] = []
  var check: [Double] = []
  var checkFloor: [Double] = []
  let checkArgs = [
    "check", "--json", "--approve-all", "--manifests", gatingDir + "/manifests", "--plugins",
    gatingDir + "/plugins", "--state", gatingDir + "/state",
  ]
  let forsettiHost = PeerBench.ownDirectory() + "/forsetti-host"
  let hasHost = access(forsettiHost, X_OK) == 0
  if !hasHost { progress("gating: no \(forsettiHost); the check --json row is skipped") }
  for _ in 0..<rounds {
    ParallelMap.limitWorkers(to: 0)
    gating.append(GatingBench.gate(gatingDir) / Double(many))
    ParallelMap.limitWorkers(to: 1)
    gatingOne.append(GatingBench.gate(gatingDir) / Double(many))
    ParallelMap.limitWorkers(to: 0)
    if let f = floors.gate(gatingDir, count: many) { floor.append(f / Double(many)) }
    if hasHost {
      let c = PeerBench.spawn(forsettiHost, checkArgs, captureOutput: false)
      if c.status == 0 { check.append(c.ns) } else { progress("gating: check --json exited \(c.status)") }
      if let f = floors.wholeProcess(["gate", gatingDir, "\(many)"]) { checkFloor.append(f) }
    }
  }
  let floorSample = Sample(
    name: "C floor: read each manifest whole + libelf scan of each binary, per module (1 thread)",
    perOp: floor)
  rows.append(
    (
      Sample(
        name: "discovery + gating of \(many) modules, per module (\(ParallelMap.processors) threads)",
        perOp: gating),
      floorSample, "manifest read and validation, ELF inspection, the gate stack; target ≤ 1.5× the floor"
    ))
  rows.append(
    (
      Sample(name: "discovery + gating of \(many) modules, per module (1 thread)", perOp: gatingOne),
      floorSample, "the same work on one thread, against the same one-thread floor"
    ))
  if hasHost {
    rows.append(
      (
        Sample(
          name: "forsetti-host check --json, \(many) modules, whole process (spawn → reaped)", perOp: check),
        Sample(
          name: "C floor: manifests read + libelf scan of \(many) binaries, whole process", perOp: checkFloor),
        "output to /dev/null; target ≤ 2× (issue 30)"
      ))
  }
}

// 2. Activation of 50 in-process modules vs raw dlopen + dlsym + one call.
if section("activation") {
  progress("activating 50 modules")
  var activation: [Double] = []
  var rawLoad: [Double] = []
  for r in 0..<(quick ? 3 : 7) {
    let dir = work + "/activate-\(r)"
    try? FileManager.default.createDirectory(atPath: dir + "/plugins", withIntermediateDirectories: true)
    try? FileManager.default.createDirectory(atPath: dir + "/manifests", withIntermediateDirectories: true)
    for n in 0..<50 {
      let m = Fixtures.module(
        id: "com.bench.a\(r)x\(n)", entry: "act_\(r)_\(n)", start: "return FORSETTI_OK;")
      try Fixtures.install(m, in: dir, include: include)
      try FileManager.default.copyItem(
        atPath: dir + "/plugins/act_\(r)_\(n).so", toPath: dir + "/raw_\(n).so")
    }
    let (judgements, index) = try Fixtures.judge(dir)
    let manager = ModuleManager(
      environment: HostEnvironment(stateDirectory: dir + "/state", log: MemoryLogSink()))
    // Writeback of the 100 fresh files would otherwise land on whichever side runs first.
    sync()
    func raw() {
      let t1 = Clock.ns()
      for n in 0..<50 {
        guard let h = dlopen(dir + "/raw_\(n).so", RTLD_NOW | RTLD_LOCAL), let f = dlsym(h, "act_\(r)_\(n)")
        else { continue }
        _ = unsafeBitCast(f, to: (@convention(c) (UInt32) -> UnsafeRawPointer?).self)(0x1_0000)
      }
      rawLoad.append(Double(Clock.ns() - t1) / 50)
    }
    // Alternate which side goes first, so neither always meets a colder cache.
    if r % 2 == 1 { raw() }
    let t0 = Clock.ns()
    manager.activate(judgements, index: index)
    activation.append(Double(Clock.ns() - t0) / 50)
    if r % 2 == 0 { raw() }
    manager.stopAll()
  }
  rows.append(
    (
      Sample(
        name: "activation of 50 in-process modules (load → start returned), per module", perOp: activation),
      Sample(name: "raw dlopen + dlsym + one call, per module", perOp: rawLoad),
      "includes identity/UI checks, sandbox setup and 2 libffi closures per module"
    ))
}

// 3. One host-API call vs a bare libffi closure vs a direct C call, all from C in a module.
if section("calls") {
  progress("host calls")
  let callDir = work + "/calls"
  try? FileManager.default.createDirectory(atPath: callDir + "/plugins", withIntermediateDirectories: true)
  try? FileManager.default.createDirectory(atPath: callDir + "/manifests", withIntermediateDirectories: true)
  try Fixtures.install(
    Fixtures.module(
      id: "com.bench.probe", entry: "probe_entry", start: CallBench.start, prelude: CallBench.probe),
    in: callDir, include: include)
  let callManager = try Fixtures.start(callDir, log: MemoryLogSink(), mode: .inProcess)
  let lib = callDir + "/plugins/probe_entry.so"
  let n = quick ? 200_000 : 1_000_000
  if let loop = CallBench.function(lib, "bench_loop", as: CallBench.Loop.self),
    let direct = CallBench.function(lib, "bench_direct", as: CallBench.PerCall.self),
    let bound = CallBench.function(lib, "bench_bound", as: CallBench.PerCall.self),
    let fan = CallBench.function(lib, "bench_fan", as: CallBench.PerCall.self),
    let fanDirect = CallBench.function(lib, "bench_fan_direct", as: CallBench.PerCall.self)
  {
    let bare = BenchmarkProbes.bareClosure()
    // Interleaved round by round, so a change in the VM's speed touches all three alike.
    var boundTimes: [Double] = []
    var bareTimes: [Double] = []
    var directTimes: [Double] = []
    for _ in 0..<rounds {
      boundTimes.append(bound(n))
      bareTimes.append(loop(bare, n))
      directTimes.append(direct(n))
    }
    let boundSample = Sample(
      name: "host-API call (events.unsubscribe, libffi closure bound to the module)", perOp: boundTimes)
    let bareSample = Sample(name: "bare libffi closure doing nothing", perOp: bareTimes)
    let directSample = Sample(name: "direct C call through a function pointer", perOp: directTimes)
    rows.append((boundSample, bareSample, "target ≤ 1.25× (the token passed is a stale one of the module)"))
    rows.append((bareSample, directSample, "the price of a closure itself (about 10× in DESIGN.md)"))
    var fanTimes: [Double] = []
    var fanDirectTimes: [Double] = []
    for _ in 0..<rounds {
      fanTimes.append(fan(n / 10))
      fanDirectTimes.append(fanDirect(n / 10))
    }
    let fanSample = Sample(name: "event published to 10 subscribers", perOp: fanTimes)
    let fanDirectSample = Sample(name: "10 direct handler calls", perOp: fanDirectTimes)
    rows.append(
      (
        fanSample, fanDirectSample,
        String(format: "%.0f events/s, %.0f deliveries/s", 1e9 / fanSample.median, 1e10 / fanSample.median)
      ))
  }
  callManager.stopAll()
}

// 4. Host-call round trip through a worker vs a raw SOCK_SEQPACKET round trip to a process.
var settings = IsolationSettings(workerExecutable: IsolationSettings.defaultWorker)
settings.startTimeout = 60
let mode = ExecutionMode.isolated(settings)
let rtDir = work + "/roundtrip"
if section("roundtrip") {
  progress("worker round trip")
  let calls = quick ? 500 : 2000
  try? FileManager.default.createDirectory(atPath: rtDir + "/plugins", withIntermediateDirectories: true)
  try? FileManager.default.createDirectory(atPath: rtDir + "/manifests", withIntermediateDirectories: true)
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
  try Fixtures.install(caller, in: rtDir, include: include)
  let log = MemoryLogSink()
  let m1 = try Fixtures.start(rtDir, log: log, mode: mode)
  let hostCall = Sample(
    name: "host call through a worker (publish, no subscriber)",
    perOp: log.all.compactMap { $0.message.hasPrefix("rt ") ? Double($0.message.dropFirst(3)) : nil })
  m1.stopAll()
  // The ring echo and the C socketpair echo alternate round by round.
  var ringTimes: [Double] = []
  var echoTimes: [Double] = []
  for _ in 0..<rounds {
    ringTimes += EchoChild.ringRoundTrips(rounds: 1, ops: calls)
    if let e = floors.echo(calls) { echoTimes.append(e) }
  }
  let ring = Sample(
    name: "raw round trip of the same call ring to another process (an echo)", perOp: ringTimes)
  let socket = Sample(
    name: "C floor: SOCK_SEQPACKET socketpair echo to a forked child, per round trip", perOp: echoTimes)
  rows.append((hostCall, socket, "the C floor of a call across processes (issue 30)"))
  rows.append((hostCall, ring, "target ≤ 1.5× and under 10 µs"))
  rows.append((ring, socket, "what spinning on shared memory saves over a blocking socket"))
}

// 4b. A module calling another module (a role service) between two workers vs a host call
// through one worker, measured by the same consumer in alternated rounds.
var roleLoadTable = ""
if section("roles") {
  progress("role call between two workers")
  let calls = quick ? 500 : 2000
  let dir = work + "/roles"
  for sub in ["/plugins", "/manifests"] {
    try? FileManager.default.createDirectory(atPath: dir + sub, withIntermediateDirectories: true)
  }
  let provider = Fixtures.module(
    id: "com.bench.provider", entry: "provider_entry",
    start: """
      const forsetti_role_service *r = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      return r && r->serve(answer, NULL) == FORSETTI_OK ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """,
    prelude: """
      #include <string.h>
      static forsetti_status answer(void *c, const char *caller, const char *method, const void *req, size_t len,
                                    void *resp, size_t cap, size_t *rlen) {
        (void)c; (void)caller; (void)method;
        if (len > cap) return FORSETTI_ERR_BUFFER_TOO_SMALL;
        memcpy(resp, req, len); *rlen = len; return FORSETTI_OK;
      }
      """)
  let consumer = Fixtures.module(
    id: "com.bench.consumer", entry: "consumer_entry",
    start: """
      const forsetti_events *e = host->resolve(FORSETTI_SERVICE_EVENTS);
      const forsetti_role_service *r = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      if (!e || !r) return FORSETTI_ERR_START_FAILED;
      char line[64], out[16]; size_t n = 0;
      for (int round = 0; round < \(rounds); round++) {
        struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
        for (int i = 0; i < \(calls); i++) e->publish("bench.nobody", "", 0);
        clock_gettime(CLOCK_MONOTONIC, &b);
        snprintf(line, sizeof line, "host %.1f", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / \(calls).0);
        host->log(FORSETTI_LOG_INFO, line);
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (int i = 0; i < \(calls); i++) {
          if (r->call("get", "12345678", 8, out, sizeof out, &n) != FORSETTI_OK) return FORSETTI_ERR_START_FAILED;
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        snprintf(line, sizeof line, "role %.1f", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / \(calls).0);
        host->log(FORSETTI_LOG_INFO, line);
      }
      return FORSETTI_OK;
      """)
  try Fixtures.install(
    provider, in: dir, include: include, capabilities: ["shared_database"],
    extra: #","defaultModuleRole":"shared_database""#)
  try Fixtures.install(
    consumer, in: dir, include: include, capabilities: ["shared_database"],
    extra:
      #","manifestTemplateVersion":"1.1","runtimeRequirements":{"io":[],"dataIsolation":{"mode":"framework_mediated_shared"}}"#
  )
  let log = MemoryLogSink()
  let m = try Fixtures.start(dir, log: log, mode: mode)
  func times(_ prefix: String) -> [Double] {
    log.all.compactMap { $0.message.hasPrefix(prefix) ? Double($0.message.dropFirst(prefix.count)) : nil }
  }
  let role = times("role ")
  if role.count != rounds {
    progress("the role bench did not run: \(log.all.suffix(5).map(\.message))")
  }
  rows.append(
    (
      Sample(name: "role call, consumer worker → provider worker (8-byte echo)", perOp: role),
      Sample(name: "host call through one worker (publish, no subscriber)", perOp: times("host ")),
      "target ≤ 2×"
    ))
  m.stopAll()

  // Issue 39: providers of concurrency 1, 4 and 16 under 1, 4 and 16 consumer modules, and a
  // polite consumer alone and beside a flooding one (RoleLoadBench).
  progress("roles under load: providers of concurrency 1, 4, 16; a polite consumer beside a flood")
  let load = try RoleLoadBench.run(
    work: work, include: include, mode: mode, rounds: quick ? 3 : 5, windowMS: quick ? 300 : 700)
  if json { rows += load.rows } else { roleLoadTable = load.table }
}

// 5. Worker start and memory: forked by the zygote vs spawned, alternated.
if section("spawn") {
  progress("worker start: zygote vs spawn")
  let (forked, spawned, trueSpawns, unavailable) = ZygoteBench.processStart(
    rounds: quick ? 10 : 40, floors: floors)
  if let unavailable { progress("the zygote was not used: \(unavailable)") }
  let trueSample = Sample(name: "C floor: posix_spawn + waitpid of /bin/true", perOp: trueSpawns)
  rows.append(
    (
      Sample(name: "worker process start, forked by the zygote (ask → first answer)", perOp: forked),
      trueSample, "the C floor of starting a process (issue 30)"
    ))
  rows.append(
    (
      Sample(name: "worker process start, posix_spawn + exec (ask → first answer)", perOp: spawned),
      trueSample, "the same floor; the worker's exec, dynamic linking and Swift runtime on top"
    ))
  rows.append(
    (
      Sample(name: "worker process start, forked by the zygote (ask → first answer)", perOp: forked),
      Sample(name: "worker process start, posix_spawn + exec (ask → first answer)", perOp: spawned),
      "target ≤ 1.5 ms; fork vs exec, dynamic linking and the Swift runtime's start-up"
    ))
  let trivial = Fixtures.module(id: "com.bench.trivial", entry: "trivial_entry", start: "return FORSETTI_OK;")
  var startDirs: [String] = []
  for name in ["start-forked", "start-spawned"] {
    let d = work + "/" + name
    try? FileManager.default.createDirectory(atPath: d + "/plugins", withIntermediateDirectories: true)
    try? FileManager.default.createDirectory(atPath: d + "/manifests", withIntermediateDirectories: true)
    try Fixtures.install(trivial, in: d, include: include)
    startDirs.append(d)
  }
  let warm = try ZygoteBench.warmStarts(
    (startDirs[0], startDirs[1]), id: "com.bench.trivial", rounds: quick ? 10 : 30)
  rows.append(
    (
      Sample(
        name: "isolated module start, running host (fork, cgroup, confine, load, start)", perOp: warm.forked),
      Sample(
        name: "isolated module start, running host, spawned (spawn, cgroup, confine, load, start)",
        perOp: warm.spawned),
      "reconcile: module enabled → started; the zygote already running"
    ))
  var rss: [Double] = []
  for _ in 0..<(quick ? 3 : 5) {
    let m = try Fixtures.start(startDirs[0], log: MemoryLogSink(), mode: ZygoteBench.settings(zygote: true))
    if let pid = m.workerPID("com.bench.trivial") { rss.append(Fixtures.rssKiB(pid) * 1024) }
    m.stopAll()
  }
  rows.append(
    (Sample(name: "worker resident memory (bytes), one module", perOp: rss), nil, "VmRSS after start"))
  let many = quick ? 50 : 200
  progress("\(many) workers at once, zygote vs spawn")
  let manyDir = work + "/many"
  try ZygoteBench.install(count: many, in: manyDir, include: include)
  let forkedMany = try ZygoteBench.manyWorkers(manyDir, count: many, zygote: true)
  let spawnedMany = try ZygoteBench.manyWorkers(manyDir, count: many, zygote: false)
  rows.append(
    (
      Sample(
        name: "PSS per worker, \(forkedMany.started) workers forked by the zygote (bytes)",
        perOp: forkedMany.pss),
      Sample(name: "PSS per worker, \(spawnedMany.started) workers spawned (bytes)", perOp: spawnedMany.pss),
      "smaps_rollup; target ≤ 3 MiB at 200"
    ))
  rows.append(
    (
      Sample(
        name: "RSS per worker, \(forkedMany.started) workers forked by the zygote (bytes)",
        perOp: forkedMany.rss),
      Sample(name: "RSS per worker, \(spawnedMany.started) workers spawned (bytes)", perOp: spawnedMany.rss),
      "resident, shared pages counted in full in each"
    ))
}

// 6. Hot reload: file event → new start returned, vs a raw copy + dlopen + dlsym of the same file.
if section("reload") {
  progress("hot reload")
  let variants = [
    ("in-process", ExecutionMode.inProcess, false), ("isolated, a new worker", mode, false),
    ("isolated, a spare worker as in dev", mode, true),
  ]
  for (v, (label, reloadMode, spare)) in variants.enumerated() {
    let dir = work + "/reload-\(v)"
    try? FileManager.default.createDirectory(atPath: dir + "/plugins", withIntermediateDirectories: true)
    try? FileManager.default.createDirectory(atPath: dir + "/manifests", withIntermediateDirectories: true)
    if case .inProcess = reloadMode {
      // The product's path, as `dev --in-process` runs it (ReloadBench).
      let (latencies, raws) = try ReloadBench.inProcess(
        dir: dir, include: include, rounds: quick ? 5 : 15, floors: floors)
      rows.append(
        (
          Sample(name: "hot reload, \(label) (file event → new start returned)", perOp: latencies),
          Sample(name: "C floor: copy + dlopen + dlsym of the same file", perOp: raws),
          "LiveHost as dev runs it (debounce 0): the Judge re-reads every input, then reconcile; target ≤ 1.5×"
        ))
      continue
    }
    let hot = Fixtures.module(id: "com.bench.hot", entry: "hot_entry", start: "return FORSETTI_OK;")
    try Fixtures.install(hot, in: dir, include: include)
    let manager = try Fixtures.start(dir, log: MemoryLogSink(), mode: reloadMode, versionCopies: true)
    manager.keepsSpareWorker = spare
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
      let reports = manager.reconcile(
        DesiredState(judgements: judgements, index: index, approvals: .init(approveAll: true)),
        changed: [dir + "/plugins/hot_entry.so"], reloadsVersions: true, grace: 0, since: at)
      ReloadBench.tally(reports, dir: dir, round: n, floors: floors, latencies: &latencies, raws: &raws)
    }
    withExtendedLifetime(watcher) {}
    manager.stopAll()
    rows.append(
      (
        Sample(name: "hot reload, \(label) (file event → new start returned)", perOp: latencies),
        Sample(name: "C floor: copy + dlopen + dlsym of the same file", perOp: raws),
        spare
          ? "re-gates every manifest and re-inspects every binary first; target ≤ 2 ms (issue 30)"
          : "re-gates every manifest and re-inspects every binary first"
      ))
  }
}

// 7. Beside go-plugin, only when asked (`--peers` or `--only peers`; scripts/bench --peers builds the
// peer and passes `--go-plugin DIR`).
if only == "peers" || (only == nil && args.contains("--peers")) {
  progress("beside go-plugin")
  let dir = args.firstIndex(of: "--go-plugin").flatMap { $0 + 1 < args.count ? args[$0 + 1] : nil } ?? ""
  rows += try PeerBench.run(
    goPlugin: dir, work: work, include: include, mode: mode, rounds: rounds, calls: quick ? 500 : 2000)
}

// 7b. Issues 30 and 44: many isolated modules under `forsetti-host run`, beside go-plugin when
// built (`--peers`); and a module started in a running host.
let goDir = args.firstIndex(of: "--go-plugin").flatMap { $0 + 1 < args.count ? args[$0 + 1] : nil }
/// `--host PATH`: the forsetti-host (with its forsetti-worker beside it) the host rows run, for a
/// before/after of two builds with the same bench.
let hostBinary =
  args.firstIndex(of: "--host").flatMap { $0 + 1 < args.count ? args[$0 + 1] : nil }
  ?? PeerBench.ownDirectory() + "/forsetti-host"
if section("scale") {
  let count = quick ? 100 : 1000
  progress("\(count) isolated modules under forsetti-host run (\(hostBinary))")
  rows += try HostRunBench.scale(
    count: count, rounds: quick ? 1 : 3, work: work, include: include, host: hostBinary, goPlugin: goDir,
    floors: floors)
}
if section("running") {
  progress("a module started in a running host (\(hostBinary))")
  rows += try HostRunBench.startInRunningHost(
    rounds: rounds, work: work, include: include, host: hostBinary, goPlugin: goDir)
}

// 8. Issue 25: a healthy module alone and beside each hostile neighbour, under a real
// `forsetti-host run`, as root and as uid 65534 (NeighbourBench).
var neighbourTable = ""
if section("neighbours") {
  progress("a healthy module beside hostile neighbours")
  let neighbours = try NeighbourBench.run(
    work: work, include: include, rounds: quick ? 1 : 3, windowMS: quick ? 1000 : 1500)
  if json { rows += neighbours.rows } else { neighbourTable = neighbours.table }
}

// 9. Issue 43: `forsetti-host upgrade` of a running host with a ticking module and 1 or 200
// modules, against a restart of the same host (UpgradeBench).
var upgradeTable = ""
if section("upgrade") {
  progress("upgrade of a running host: 1 and 200 modules, against a restart")
  let upgrade = try UpgradeBench.run(work: work, include: include, counts: [1, 200], rounds: quick ? 1 : 3)
  rows += upgrade.rows
  if !json { upgradeTable = upgrade.table }
}

Report.print(rows, json: json)
if !roleLoadTable.isEmpty { print("\n" + roleLoadTable) }
if !neighbourTable.isEmpty { print("\n" + neighbourTable) }
if !upgradeTable.isEmpty { print("\n" + upgradeTable) }
