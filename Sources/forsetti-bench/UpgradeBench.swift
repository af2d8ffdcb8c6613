import Foundation
import Glibc

/// Issue 43: `forsetti-host upgrade` of a real `forsetti-host run` (copies of the release host
/// and worker in a bin directory of their own, the host's file replaced by a rename, as a package
/// upgrade does) with a ticking module (`UpgradeModules`: a host call every 5 ms from its own
/// thread, timed in the module) and N−1 idle ones. Per round and N: the time from `upgrade` to
/// the new image answering it, and the longest gap the ticker saw in its host calls across it,
/// against the same host restarted (SIGTERM, started again, until the ticker's host calls are
/// answered again: what an upgrade was before) and against an equal quiet span just before.
/// A round whose workers did not keep their pids counts as failed and is left out.
enum UpgradeBench {
  typealias Row = (figure: Sample, baseline: Sample?, note: String)

  /// The issue's target for the longest gap, in ms.
  static let targetGapMS = 100.0
  /// How long after `upgrade` returned the ticker's calls still count as the upgrade's.
  static let marginNS: UInt64 = 300_000_000
  /// How long the ticker ticks before the upgrade (the quiet span is taken from it).
  static let warmNS: UInt64 = 2_000_000_000

  /// One round at one N, in ns; nil where it was not measured.
  struct Round {
    var upgrade: Double?
    var upgradeGap: Double?
    var upgradeCall: Double?
    var quietGap: Double?
    var quietCall: Double?
    var restart: Double?
    var restartGap: Double?
    /// Since `upgrade` was asked (host.log's wall-clock times, to the ms): the old image saying
    /// it hands over (its preflight of the new file passed; it then pauses the calls and
    /// execs), the new image's first line, its line keeping the ticker, and its "now runs" line;
    /// and the ticker's longest call beginning and ending.
    var handingOver: Double?
    var newImage: Double?
    var tickerKept: Double?
    var nowRuns: Double?
    var stallFrom: Double?
    var stallTo: Double?
    /// Why the round failed (it is left out of the figures), if it did.
    var failure: String?
  }

  /// The ticker's lines (`UpgradeModules.source`).
  struct Ticks {
    struct Window {
      var end: UInt64
      var maxCall: UInt64
      var maxCallStart: UInt64
      var maxGap: UInt64
      var last: UInt64
    }
    var firsts: [UInt64] = []
    var windows: [Window] = []
    var stops: [UInt64] = []

    init(_ path: String) {
      let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
      for line in text.split(separator: "\n") {
        let f = line.split(separator: " ")
        let v = f.dropFirst().compactMap { UInt64($0) }
        switch f.first {
        case "f" where v.count == 1: firsts.append(v[0])
        case "s" where v.count == 1: stops.append(v[0])
        case "w" where v.count == 6:
          windows.append(Window(end: v[0], maxCall: v[1], maxCallStart: v[2], maxGap: v[3], last: v[4]))
        default: break
        }
      }
    }

    /// The windows that overlap [from, to] (a window begins where the one before it ended).
    func overlapping(_ from: UInt64, _ to: UInt64) -> [Window] {
      var out: [Window] = []
      var start: UInt64 = 0
      for w in windows {
        if w.end >= from && start <= to { out.append(w) }
        start = w.end
      }
      return out
    }

    /// The windows wholly inside [from, to).
    func inside(_ from: UInt64, _ to: UInt64) -> [Window] {
      var out: [Window] = []
      var start: UInt64 = 0
      for w in windows {
        if start >= from && w.end < to { out.append(w) }
        start = w.end
      }
      return out
    }
  }

  static func run(work: String, include: String, counts: [Int], rounds: Int) throws -> (
    rows: [Row], table: String
  ) {
    let built = PeerBench.ownDirectory()
    guard access(built + "/forsetti-host", X_OK) == 0, access(built + "/forsetti-worker", X_OK) == 0 else {
      progress("upgrade: no forsetti-host or forsetti-worker beside the bench (scripts/bench builds them)")
      return ([], "")
    }
    let root = work + "/upgrade"
    for n in counts { try layout(root + "/n\(n)", count: n, include: include) }
    sync()
    let loadBefore = NeighbourBench.loadAverage()
    let identity = geteuid() == 0 ? "root" : "uid \(geteuid())"
    var results: [Int: [Round]] = [:]
    var runs = 0
    for round in 0..<rounds {
      for n in round % 2 == 0 ? counts : Array(counts.reversed()) {
        runs += 1
        progress("upgrade: round \(round + 1)/\(rounds), \(n) module\(n == 1 ? "" : "s") (as \(identity))")
        let r = once(built: built, dir: root + "/n\(n)", run: root + "/run-\(runs)", count: n)
        if let failure = r.failure {
          progress("upgrade: round \(round + 1), \(n) modules FAILED: \(failure)")
        }
        progress("upgrade:   " + describe(r))
        results[n, default: []].append(r)
      }
    }
    let load = "load average \(loadBefore) before, \(NeighbourBench.loadAverage()) after"
    return (
      rows(results, counts: counts, identity: identity, load: load),
      table(results, counts: counts, load: load)
    )
  }

  /// manifests/ and plugins/ for `count` modules: the ticker and `count` − 1 idle ones, one library.
  static func layout(_ dir: String, count: Int, include: String) throws {
    for sub in ["/plugins", "/manifests"] {
      try FileManager.default.createDirectory(atPath: dir + sub, withIntermediateDirectories: true)
    }
    let src = dir + "/upgrade.c"
    try UpgradeModules.source(idle: count - 1).write(toFile: src, atomically: true, encoding: .utf8)
    let so = dir + "/plugins/upgrade.so"
    let cc = PeerBench.spawn(
      "/usr/bin/env", ["cc", "-O2", "-shared", "-fPIC", "-I", include, "-o", so, src], captureOutput: false)
    guard cc.status == 0 else { throw NeighbourBench.NeighbourBenchError.build(so) }
    var modules = [(UpgradeModules.tickerID, UpgradeModules.tickerEntry)]
    modules += (0..<(count - 1)).map { (UpgradeModules.idleID($0), UpgradeModules.idleEntry($0)) }
    for (id, entry) in modules {
      let manifest = """
        {"schemaVersion":"1.0","moduleID":"\(id)","displayName":"bench","moduleVersion":{"major":1,"minor":0,"patch":0},
         "moduleType":"service","supportedPlatforms":["linux"],"minForsettiVersion":{"major":0,"minor":1,"patch":0},
         "capabilitiesRequested":[],"entryPoint":"\(entry)"}
        """
      try manifest.write(toFile: dir + "/manifests/\(id).json", atomically: true, encoding: .utf8)
    }
  }

  /// One round: start the host from a copy, wait for every module and for the ticker to tick,
  /// replace the copy and `upgrade`; then SIGTERM it and start it again (the restart).
  static func once(built: String, dir: String, run: String, count: Int) -> Round {
    var r = Round()
    let bin = run + "/bin"
    let state = run + "/state"
    defer { try? FileManager.default.removeItem(atPath: run) }
    do {
      try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
      try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
      for name in ["forsetti-host", "forsetti-worker"] {
        try FileManager.default.copyItem(atPath: built + "/" + name, toPath: bin + "/" + name)
      }
    } catch {
      r.failure = "the host could not be copied: \(error)"
      return r
    }
    let host = bin + "/forsetti-host"
    let arguments = [
      host, "run", "--manifests", dir + "/manifests", "--plugins", dir + "/plugins", "--state", state,
      "--approve-all", "--for", "600",
    ]
    let output = run + "/host.out"
    let ticks = state + "/sandboxes/\(UpgradeModules.tickerID)/" + UpgradeModules.ticksFile
    let log = state + "/logs/host.log"
    guard var pid = NeighbourBench.start(arguments, output: output) else {
      r.failure = "could not start \(host)"
      return r
    }
    func said() -> String {
      let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
      return text.split(separator: "\n").suffix(6).joined(separator: "\n    ")
    }
    // Every module up and its worker running, and the ticker ticking for warmNS.
    let up = wait(seconds: 120, pid: pid) {
      let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
      guard text.components(separatedBy: "] \(UpgradeModules.upLine)").count - 1 >= count,
        liveWorkers(of: pid).count >= count, let first = Ticks(ticks).firsts.first
      else { return false }
      return Clock.ns() > first + warmNS
    }
    guard up else {
      r.failure = "the modules did not all start; the host said:\n    \(said())"
      NeighbourBench.stop(pid)
      return r
    }
    let before = liveWorkers(of: pid)
    // The new file, renamed over the old one as a package manager does.
    do {
      try? FileManager.default.removeItem(atPath: host + ".new")
      try FileManager.default.copyItem(atPath: built + "/forsetti-host", toPath: host + ".new")
      guard rename(host + ".new", host) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
    } catch {
      r.failure = "the host's file could not be replaced: \(error)"
      NeighbourBench.stop(pid)
      return r
    }
    sync()
    let wall0 = wallNS()
    let t0 = Clock.ns()
    let upgrade = runToEnd([host, "upgrade", "--state", state], output: run + "/upgrade.out")
    let t1 = Clock.ns()
    if upgrade != 0 {
      let text = (try? String(contentsOfFile: run + "/upgrade.out", encoding: .utf8)) ?? ""
      r.failure = "upgrade exited \(upgrade): \(text)"
    }
    let after = liveWorkers(of: pid)
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")) ?? ""
    if r.failure == nil && after != before {
      r.failure =
        "the workers changed across the upgrade: \(before.count) before, \(after.count) after, "
        + "\(Set(before).intersection(after).count) kept"
    } else if r.failure == nil && exe != host {
      r.failure = "the host does not run the new file: /proc/\(pid)/exe is \(exe)"
    }
    // The ticker's calls until the margin has passed and it has written a window after it.
    let end = t1 + marginNS
    let ticked = wait(seconds: 15, pid: pid) { (Ticks(ticks).windows.last?.end ?? 0) > end }
    if r.failure == nil && !ticked { r.failure = "the ticker did not tick again within 15 s of the upgrade" }
    if r.failure == nil {
      r.upgrade = Double(t1 - t0)
      let t = Ticks(ticks)
      let during = t.overlapping(t0, end)
      r.upgradeGap = during.map { Double($0.maxGap) }.max()
      r.upgradeCall = during.map { Double($0.maxCall) }.max()
      let quiet = t.inside(t0 - (end - t0), t0)
      r.quietGap = quiet.map { Double($0.maxGap) }.max()
      r.quietCall = quiet.map { Double($0.maxCall) }.max()
      if let stall = during.max(by: { $0.maxCall < $1.maxCall }) {
        r.stallFrom = Double(stall.maxCallStart) - Double(t0)
        r.stallTo = Double(stall.maxCallStart + stall.maxCall) - Double(t0)
      }
      let lines = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n")
      if let at = lines.lastIndex(where: { $0.contains("upgrade: handing over ") }) {
        let since = { (line: Substring?) in line.flatMap(stamp).map { $0 - wall0 } }
        r.handingOver = since(lines[at])
        r.newImage = since(lines[(at + 1)...].first)
        r.tickerKept = since(lines[at...].first { $0.contains("kept \(UpgradeModules.tickerID) ") })
        r.nowRuns = since(lines[at...].first { $0.contains("upgrade: this host (pid ") })
      }
    }
    // The restart, as before this feature: SIGTERM, then the same command again, until the
    // ticker's first host call of the new worker is answered.
    let stopped = Clock.ns()
    NeighbourBench.stop(pid)
    guard let again = NeighbourBench.start(arguments, output: output) else {
      r.failure = r.failure ?? "could not start \(host) again"
      return r
    }
    pid = again
    let restarted = wait(seconds: 120, pid: pid) { Ticks(ticks).firsts.count >= 2 }
    let t = Ticks(ticks)
    if restarted, let first = t.firsts.last {
      r.restart = Double(first - stopped)
      // The old worker's last answered call: its stop line, else its last window.
      let last = t.stops.first ?? t.windows.last(where: { $0.end < stopped })?.last ?? stopped
      r.restartGap = Double(first - last)
    } else {
      progress("upgrade: the restarted host did not tick within 120 s; the host said:\n    \(said())")
    }
    NeighbourBench.stop(pid)
    // FORSETTI_BENCH_UPGRADE_LOGS=DIR keeps each round's host.log and ticks (to look at a gap).
    if let keep = ProcessInfo.processInfo.environment["FORSETTI_BENCH_UPGRADE_LOGS"] {
      let name = keep + "/" + (run as NSString).lastPathComponent + "-n\(count)"
      try? FileManager.default.createDirectory(atPath: keep, withIntermediateDirectories: true)
      try? FileManager.default.copyItem(atPath: log, toPath: name + ".host.log")
      try? FileManager.default.copyItem(atPath: ticks, toPath: name + ".ticks")
      try? "t0 \(t0) wall0 \(wall0) t1 \(t1)\n".write(toFile: name + ".t0", atomically: true, encoding: .utf8)
    }
    return r
  }

  /// Polls `done` every 10 ms until it holds, `seconds` pass, or the host exits.
  static func wait(seconds: Double, pid: pid_t, _ done: () -> Bool) -> Bool {
    let deadline = Clock.ns() + UInt64(seconds * 1e9)
    while Clock.ns() < deadline {
      if done() { return true }
      if kill(pid, 0) != 0 { return false }
      usleep(10_000)
    }
    return false
  }

  /// Runs `arguments` to its end, output into `output`; its exit status (-1 if not started).
  static func runToEnd(_ arguments: [String], output: String) -> Int32 {
    guard let pid = NeighbourBench.start(arguments, output: output) else { return -1 }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    return (status & 0x7f) == 0 ? (status >> 8) & 0xff : -1
  }

  /// The host's live workers: its children but the zygote, and not a zombie (the new image's
  /// zygote, spawned ahead of need, is reaped only when it first forks).
  static func liveWorkers(of pid: pid_t) -> [pid_t] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap { name -> pid_t? in
      guard let child = pid_t(name),
        let stat = try? String(contentsOfFile: "/proc/\(name)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
      else { return nil }
      let fields = stat[stat.index(after: close)...].split(separator: " ")
      guard fields.count > 1, pid_t(fields[1]) == pid, fields[0] != "Z" else { return nil }
      let argv = (try? String(contentsOfFile: "/proc/\(name)/cmdline", encoding: .utf8)) ?? ""
      return argv.hasSuffix("--zygote\0") ? nil : child
    }.sorted()
  }

  static func wallNS() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_REALTIME, &t)
    return Double(t.tv_sec) * 1e9 + Double(t.tv_nsec)
  }

  /// The wall-clock time (ns) of a host.log line, from its `YYYY-MM-DDTHH:MM:SS.mmmZ` prefix.
  static func stamp(_ line: Substring) -> Double? {
    guard let stamp = line.split(separator: " ").first, stamp.count == 24 else { return nil }
    let s = Array(stamp.utf8)
    func num(_ from: Int, _ count: Int) -> Int32 {
      Int32(String(decoding: s[from..<from + count], as: UTF8.self)) ?? 0
    }
    var tm = Glibc.tm()
    tm.tm_year = num(0, 4) - 1900
    tm.tm_mon = num(5, 2) - 1
    tm.tm_mday = num(8, 2)
    tm.tm_hour = num(11, 2)
    tm.tm_min = num(14, 2)
    tm.tm_sec = num(17, 2)
    return Double(timegm(&tm)) * 1e9 + Double(num(20, 3)) * 1e6
  }

  static func ms(_ v: Double?) -> String { v.map { String(format: "%.1f ms", $0 / 1e6) } ?? "-" }

  static func describe(_ r: Round) -> String {
    "upgrade \(ms(r.upgrade)) (handing over at \(ms(r.handingOver)), the new image's first line at "
      + "\(ms(r.newImage)), ticker kept at \(ms(r.tickerKept)), now runs at \(ms(r.nowRuns))), "
      + "longest gap \(ms(r.upgradeGap)), longest call \(ms(r.upgradeCall)) "
      + "(from \(ms(r.stallFrom)) to \(ms(r.stallTo))); quiet: gap \(ms(r.quietGap)), call \(ms(r.quietCall)); "
      + "restart \(ms(r.restart)), its gap \(ms(r.restartGap))"
  }

  static func sample(_ name: String, _ rounds: [Round], _ value: (Round) -> Double?) -> Sample {
    Sample(name: name, perOp: rounds.filter { $0.failure == nil }.compactMap(value))
  }

  static func rows(_ results: [Int: [Round]], counts: [Int], identity: String, load: String) -> [Row] {
    counts.flatMap { n -> [Row] in
      let all = results[n] ?? []
      let failed = all.filter { $0.failure != nil }.count
      let m = "\(n) module\(n == 1 ? "" : "s")"
      let rounds =
        "\(all.count - failed) of \(all.count) rounds (\(failed) failed: workers not kept or no answer)"
      let gap = sample("upgrade, \(m): longest gap between a ticking module's host calls", all) {
        $0.upgradeGap
      }
      let met = gap.median <= targetGapMS * 1e6 && gap.max <= targetGapMS * 1e6
      return [
        (
          sample("upgrade, \(m): `upgrade` asked → the new image answers it", all) { $0.upgrade },
          sample("restart, \(m): SIGTERM → the ticker's host calls answered again", all) { $0.restart },
          "as \(identity); \(rounds); the same worker pids checked each round; \(load)"
        ),
        (
          gap, sample("restart, \(m): the same gap across a restart", all) { $0.restartGap },
          "host call every \(UpgradeModules.tickEveryMS) ms (the pause counted); target < \(Int(targetGapMS)) ms: "
            + "\(met ? "met" : "missed") (median \(ms(gap.median)), max \(ms(gap.max)))"
        ),
        (
          sample("upgrade, \(m): longest single host call (events.publish) across it", all) {
            $0.upgradeCall
          },
          sample("quiet, \(m): longest single host call in an equal span just before", all) { $0.quietCall },
          "the call that waited out the handover, against the same module's calls when nothing happens"
        ),
      ]
    }
  }

  static func table(_ results: [Int: [Round]], counts: [Int], load: String) -> String {
    var out = """
      upgrade: per round, ms since `upgrade` was asked; the host's lines from host.log (to the ms): \
      handing over (the preflight passed: calls paused, exec), the new image's first line, its line keeping the \
      ticker (which sorts after every idle module), now runs; \(load)

      | modules | upgrade → answered | handing over | new image's first line | ticker kept | now runs \
      | ticker's longest call: from – to | longest gap | quiet gap | restart | restart gap | failed |
      | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |

      """
    for n in counts {
      for r in results[n] ?? [] {
        let cells = [
          ms(r.upgrade), ms(r.handingOver), ms(r.newImage), ms(r.tickerKept), ms(r.nowRuns),
          "\(ms(r.stallFrom)) – \(ms(r.stallTo))",
          ms(r.upgradeGap), ms(r.quietGap), ms(r.restart), ms(r.restartGap), r.failure ?? "",
        ]
        out += "| \(n) | " + cells.joined(separator: " | ") + " |\n"
      }
    }
    return out
  }
}
