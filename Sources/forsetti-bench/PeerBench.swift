import ForsettiRuntime
import Foundation
import Glibc

/// Forsetti beside a peer, HashiCorp's go-plugin in net/rpc mode (Benchmarks/peers/go-plugin,
/// built by `scripts/bench --peers`): start to first call, a call across the process boundary,
/// memory per isolated module and a whole host process, in alternated rounds (ours, peer, …).
enum PeerBench {
  /// One round of the Go host, as it prints it.
  struct GoRound: Decodable {
    var startNs: Double
    var callNs: Double
    var rssKiB: Double
    var pssKiB: Double
  }

  /// A finished child process: its wall time from spawn to reaped, and its peak RSS (the
  /// largest single process among it and the children it waited for, as /usr/bin/time reads it).
  struct Exit {
    var ns: Double
    var maxRSSBytes: Double
    var status: Int32
    var output: String
    /// User and system CPU of the process and every descendant it waited for.
    var cpuNs: Double = .nan
  }

  typealias Row = (figure: Sample, baseline: Sample?, note: String)

  static func run(
    goPlugin dir: String, work: String, include: String, mode: ExecutionMode, rounds: Int, calls: Int
  ) throws -> [Row] {
    let goHost = dir + "/host"
    let goPlugin = dir + "/plugin"
    guard access(goHost, X_OK) == 0, access(goPlugin, X_OK) == 0 else {
      progress("peers: no go-plugin peer in \(dir) (scripts/bench --peers builds it)")
      return []
    }
    let forsettiHost = ownDirectory() + "/forsetti-host"
    let hasHost = access(forsettiHost, X_OK) == 0 && access("/usr/bin/time", X_OK) == 0
    if !hasHost { progress("peers: no \(forsettiHost) or /usr/bin/time; the whole-process rows are skipped") }

    // Start to first call: the module's start makes one host call, so activation returning
    // means the call was answered.
    let startDir = try moduleDirectory(
      work + "/peers-start", include: include, id: "com.bench.peerstart", entry: "peerstart_entry",
      start: """
        const forsetti_events *e = host->resolve(FORSETTI_SERVICE_EVENTS);
        return e && e->publish("bench.nobody", "", 0) == FORSETTI_OK ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
        """)
    // The call: the same loop as the roundtrip section, one round per start, after 200 untimed
    // calls (the Go host makes the same 200 first).
    let callDir = try moduleDirectory(
      work + "/peers-call", include: include, id: "com.bench.peercall", entry: "peercall_entry",
      start: """
        const forsetti_events *e = host->resolve(FORSETTI_SERVICE_EVENTS);
        for (int i = 0; i < 200; i++) e->publish("bench.nobody", "", 0);
        char line[64]; struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
        for (int i = 0; i < \(calls); i++) e->publish("bench.nobody", "", 0);
        clock_gettime(CLOCK_MONOTONIC, &b);
        snprintf(line, sizeof line, "rt %.1f", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / \(calls).0);
        host->log(FORSETTI_LOG_INFO, line);
        return FORSETTI_OK;
        """)
    // The whole process: one trivial C module, as the Go host has one trivial plugin.
    let wholeDir = try moduleDirectory(
      work + "/peers-whole", include: include, id: "com.bench.peerwhole", entry: "peerwhole_entry",
      start: "return FORSETTI_OK;")
    let hostArgs = [
      "run", "--for", "0", "--approve-all", "--manifests", wholeDir + "/manifests", "--plugins",
      wholeDir + "/plugins", "--state", wholeDir + "/state",
    ]
    // The host's own start and stop, without a worker's: the same run with the module loaded
    // into the host.
    let inProcessArgs = hostArgs + ["--in-process"]
    sync()

    var ours = (start: [Double](), call: [Double](), rss: [Double](), pss: [Double]())
    var peer = (start: [Double](), call: [Double](), rss: [Double](), pss: [Double]())
    var whole = (ours: [Double](), oursRSS: [Double](), peer: [Double](), peerRSS: [Double]())
    var hostOnly = (ns: [Double](), rss: [Double]())
    // Round 0 warms the page cache for both sides and is not counted.
    for round in 0...rounds {
      let counted = round > 0

      let t0 = Clock.ns()
      let m = try Fixtures.start(startDir, log: MemoryLogSink(), mode: mode)
      let started = Double(Clock.ns() - t0)
      let pid = m.workerPID("com.bench.peerstart")
      let memory = pid.map { (Fixtures.rssKiB($0), kib("/proc/\($0)/smaps_rollup", "Pss:")) }
      m.stopAll()
      if counted, let memory {
        ours.start.append(started)
        ours.rss.append(memory.0 * 1024)
        ours.pss.append(memory.1 * 1024)
      } else if counted {
        progress("peers: the start module did not start in a worker")
      }

      let go = spawn(goHost, ["-plugin", goPlugin, "-calls", "\(calls)"], captureOutput: true)
      if counted, go.status == 0, let r = try? JSONDecoder().decode(GoRound.self, from: Data(go.output.utf8))
      {
        peer.start.append(r.startNs)
        peer.call.append(r.callNs)
        peer.rss.append(r.rssKiB * 1024)
        peer.pss.append(r.pssKiB * 1024)
      } else if counted {
        progress("peers: the go-plugin host failed (status \(go.status)): \(go.output)")
      }

      let log = MemoryLogSink()
      let c = try Fixtures.start(callDir, log: log, mode: mode)
      c.stopAll()
      if counted {
        ours.call += log.all.compactMap {
          $0.message.hasPrefix("rt ") ? Double($0.message.dropFirst(3)) : nil
        }
      }

      if hasHost {
        let f = timed(forsettiHost, hostArgs, work: work)
        let g = timed(goHost, ["-plugin", goPlugin, "-once"], work: work)
        let h = timed(forsettiHost, inProcessArgs, work: work)
        if counted, f.status == 0, g.status == 0, h.status == 0 {
          whole.ours.append(f.ns)
          whole.oursRSS.append(f.maxRSSBytes)
          whole.peer.append(g.ns)
          whole.peerRSS.append(g.maxRSSBytes)
          hostOnly.ns.append(h.ns)
          hostOnly.rss.append(h.maxRSSBytes)
        } else if counted {
          progress(
            "peers: a whole-process run failed (forsetti-host \(f.status), go host \(g.status), in-process \(h.status))"
          )
        }
      }
    }

    var rows: [Row] = [
      (
        Sample(
          name: "isolated module start to its first host call answered (spawn, confine, load, start)",
          perOp: ours.start),
        Sample(name: "go-plugin: NewClient + Client + Dispense + first net/rpc call", perOp: peer.start),
        "ours includes gating the manifest and confinement; go-plugin confines nothing"
      ),
      (
        Sample(name: "host call through a worker (publish, no subscriber)", perOp: ours.call),
        Sample(name: "go-plugin net/rpc call round trip (int echo)", perOp: peer.call),
        "\(calls) calls per round after 200 untimed, one round per start"
      ),
      (
        Sample(name: "worker resident memory after start (bytes, VmRSS)", perOp: ours.rss),
        Sample(name: "go-plugin plugin process (bytes, VmRSS)", perOp: peer.rss), "one module, one plugin"
      ),
      (
        Sample(name: "worker proportional memory after start (bytes, PSS)", perOp: ours.pss),
        Sample(name: "go-plugin plugin process (bytes, PSS)", perOp: peer.pss), "from /proc/PID/smaps_rollup"
      ),
    ]
    if hasHost {
      rows.append(
        (
          Sample(
            name: "forsetti-host run --for 0, one C module, whole process (spawn → reaped)", perOp: whole.ours
          ),
          Sample(name: "Go host: one go-plugin plugin, one call, exit", perOp: whole.peer),
          "wall time, both under /usr/bin/time"
        ))
      rows.append(
        (
          Sample(name: "forsetti-host run --for 0, peak RSS (bytes, /usr/bin/time %M)", perOp: whole.oursRSS),
          Sample(name: "Go host run, peak RSS (bytes, /usr/bin/time %M)", perOp: whole.peerRSS),
          "the largest single process of each tree (host or worker/plugin), not their sum"
        ))
      rows.append(
        (
          Sample(
            name: "forsetti-host run --for 0 --in-process (the host's own start and stop)", perOp: hostOnly.ns
          ),
          Sample(name: "Go host: one go-plugin plugin, one call, exit", perOp: whole.peer),
          "no worker: what the host process itself costs, start to reaped"
        ))
      rows.append(
        (
          Sample(name: "forsetti-host run --for 0 --in-process, peak RSS (bytes)", perOp: hostOnly.rss),
          Sample(name: "Go host run, peak RSS (bytes, /usr/bin/time %M)", perOp: whole.peerRSS),
          "the host process alone"
        ))
    }
    return rows
  }

  /// A fixture directory holding one module.
  static func moduleDirectory(_ dir: String, include: String, id: String, entry: String, start: String) throws
    -> String
  {
    for sub in ["/plugins", "/manifests"] {
      try FileManager.default.createDirectory(atPath: dir + sub, withIntermediateDirectories: true)
    }
    try Fixtures.install(Fixtures.module(id: id, entry: entry, start: start), in: dir, include: include)
    return dir
  }

  /// Runs `path` under /usr/bin/time for its peak RSS. Not wait4 from here: posix_spawn's child
  /// shares this process's memory until it execs, so its ru_maxrss starts at this process's
  /// RSS (24 MiB); /usr/bin/time forks from a 2 MiB process. Both sides pay time's exec.
  static func timed(_ path: String, _ arguments: [String], work: String) -> Exit {
    let out = work + "/peers-time"
    var exit = spawn("/usr/bin/time", ["-f", "%M", "-o", out, path] + arguments, captureOutput: false)
    let kib = (try? String(contentsOfFile: out, encoding: .utf8)).flatMap {
      Double($0.split(separator: "\n").last.map(String.init) ?? "")
    }
    exit.maxRSSBytes = kib.map { $0 * 1024 } ?? .nan
    return exit
  }

  /// Runs `path` to its end, timing it and reading its rusage; stdout kept if asked, else dropped.
  static func spawn(_ path: String, _ arguments: [String], captureOutput: Bool) -> Exit {
    var pipeFDs: [Int32] = [-1, -1]
    if captureOutput, pipe(&pipeFDs) != 0 { return Exit(ns: .nan, maxRSSBytes: .nan, status: -1, output: "") }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    if captureOutput {
      posix_spawn_file_actions_adddup2(&actions, pipeFDs[1], 1)
      posix_spawn_file_actions_addclose(&actions, pipeFDs[0])
    } else {
      posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    }
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    var argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let t0 = Clock.ns()
    guard posix_spawn(&pid, path, &actions, nil, &argv, environ) == 0 else {
      return Exit(ns: .nan, maxRSSBytes: .nan, status: -1, output: "")
    }
    var output: [UInt8] = []
    if captureOutput {
      close(pipeFDs[1])
      var buf = [UInt8](repeating: 0, count: 4096)
      while true {
        let n = read(pipeFDs[0], &buf, buf.count)
        if n <= 0 { break }
        output += buf.prefix(n)
      }
      close(pipeFDs[0])
    }
    var status: Int32 = 0
    var usage = rusage()
    while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
    let ns = Double(Clock.ns() - t0)
    let exited = status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    return Exit(
      ns: ns, maxRSSBytes: Double(usage.ru_maxrss) * 1024, status: exited,
      output: String(decoding: output, as: UTF8.self), cpuNs: cpuNs(usage))
  }

  /// User plus system time of a rusage, in nanoseconds.
  static func cpuNs(_ u: rusage) -> Double {
    Double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e9 + Double(u.ru_utime.tv_usec + u.ru_stime.tv_usec)
      * 1e3
  }

  /// One "Key:   N kB" line of a /proc file, in KiB.
  static func kib(_ path: String, _ key: String) -> Double {
    guard let s = try? String(contentsOfFile: path, encoding: .utf8),
      let line = s.split(separator: "\n").first(where: { $0.hasPrefix(key) })
    else { return .nan }
    return Double(line.split(separator: " ").dropFirst().first ?? "") ?? .nan
  }

  /// The directory of this executable, where scripts/bench builds forsetti-host beside it.
  static func ownDirectory() -> String {
    let exe =
      (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
      ?? CommandLine.arguments[0]
    return (exe as NSString).deletingLastPathComponent
  }
}
