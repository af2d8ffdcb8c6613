import ForsettiCore
import ForsettiRuntime
import Foundation
import Glibc

/// Rows measured on a real `forsetti-host run` process (issue 44): the 1,000-module start, stop,
/// threads and RSS with the host its own process (not the bench's heap), and a module started in
/// a host already running, by the control socket's `enable`, until its first host call was
/// answered. The host binary is the one built beside the bench, or `--host PATH` (a before/after
/// of two builds with the same bench).
enum HostRunBench {
  typealias Row = (figure: Sample, baseline: Sample?, note: String)

  /// `count` modules (`ScaleBench.install`) under `forsetti-host run`, `rounds` times, each
  /// round beside go-plugin's `-many` when built, else the C floor of as many spawns.
  static func scale(
    count: Int, rounds: Int, work: String, include: String, host: String, goPlugin: String?, floors: Floors
  ) throws -> [Row] {
    let dir = work + "/host-scale"
    try ScaleBench.install(count: count, in: dir, include: include)
    sync()
    var ours = (start: [Double](), stop: [Double](), threads: [Double](), rss: [Double](), cpu: [Double]())
    var peer = (start: [Double](), stop: [Double](), threads: [Double](), rss: [Double](), cpu: [Double]())
    var spawnFloor: [Double] = []
    var first: [Double] = []
    // Round 0 is the host's first start on a fresh state directory (every version copy and
    // sandbox made), reported on its own; the counted rounds restart on the state it left, as
    // an operator's host does.
    try? FileManager.default.removeItem(atPath: dir + "/state")
    for round in 0...rounds {
      let h = try RunningHost(
        host,
        [
          "run", "--approve-all", "--manifests", dir + "/manifests", "--plugins", dir + "/plugins", "--state",
          dir + "/state",
        ])
      let started = h.waitForLines(containing: "[host] started com.bench.scale", count: count, seconds: 300)
      let threads = RunningHost.threads(h.pid)
      let rss = Fixtures.rssKiB(h.pid) * 1024
      let stopped = h.terminate()
      if round == 0 {
        if let started { first.append(started) }
        continue
      }
      if let started, let stopped, h.exitStatus == 0 {
        ours.start.append(started)
        ours.stop.append(stopped)
        ours.threads.append(threads)
        ours.rss.append(rss)
        ours.cpu.append(h.cpuNs)
      } else {
        progress(
          "host scale: round \(round): \(h.counted) of \(count) started, exit status \(h.exitStatus.map(String.init) ?? "none")"
        )
      }
      if let goPlugin {
        let go = PeerBench.spawn(
          goPlugin + "/host", ["-plugin", goPlugin + "/plugin", "-many", "\(count)"], captureOutput: true)
        if go.status == 0,
          let r = try? JSONDecoder().decode(ScaleBench.GoMany.self, from: Data(go.output.utf8))
        {
          peer.start.append(r.startNs)
          peer.stop.append(r.stopNs)
          peer.threads.append(r.threads)
          peer.rss.append(r.rssKiB * 1024)
          peer.cpu.append(go.cpuNs)
        } else {
          progress("host scale: the go-plugin host failed (\(go.status))")
        }
      } else if let f = floors.spawnTrue(count) {
        spawnFloor.append(f * Double(count))
      }
    }
    let n = "\(count) isolated modules, forsetti-host run as host"
    let peerName = goPlugin != nil
    return [
      (
        Sample(
          name: "\(n): first start on a fresh state directory (spawn → every `started` line)", perOp: first),
        nil, "one round: every version copy and sandbox directory made"
      ),
      (
        Sample(
          name: "\(n): all started, restarted on its state (spawn → every `started` line)", perOp: ours.start),
        peerName
          ? Sample(name: "go-plugin: \(count) plugins started at once, each called once", perOp: peer.start)
          : Sample(name: "C floor: \(count) posix_spawns of /bin/true, one after another", perOp: spawnFloor),
        "ours includes the host's own start and gating \(count) manifests; target ≤ 1.0 s (issue 44)"
      ),
      (
        Sample(name: "\(n): all stopped (SIGTERM → host reaped, every module's stop run)", perOp: ours.stop),
        peerName ? Sample(name: "go-plugin: \(count) plugins killed at once", perOp: peer.stop) : nil,
        "ours includes the host's own exit; target ≤ go-plugin (issue 44)"
      ),
      (
        Sample(name: "\(n): host threads (count)", perOp: ours.threads),
        peerName ? Sample(name: "go-plugin host threads (count)", perOp: peer.threads) : nil,
        "target ≤ 32 (issue 30)"
      ),
      (
        Sample(name: "\(n): CPU of the host and its workers, spawn → reaped", perOp: ours.cpu),
        peerName
          ? Sample(name: "go-plugin: CPU of its host and plugins, the whole run", perOp: peer.cpu) : nil,
        "user + system time (wait4), all started and all stopped: what a quiet machine's wall time is made of"
      ),
      (
        Sample(name: "\(n): host RSS (bytes)", perOp: ours.rss),
        peerName ? Sample(name: "go-plugin host RSS (bytes)", perOp: peer.rss) : nil,
        "VmRSS of the host process"
      ),
    ]
  }

  /// A module enabled in a running host (the control socket's `enable`, as `forsetti-host
  /// enable` sends it) until its start, which makes one host call, returned; then disabled
  /// again for the next round. Beside go-plugin's start to first call when built.
  static func startInRunningHost(rounds: Int, work: String, include: String, host: String, goPlugin: String?)
    throws -> [Row]
  {
    let dir = try PeerBench.moduleDirectory(
      work + "/host-late", include: include, id: "com.bench.late", entry: "late_entry",
      start: """
        const forsetti_events *e = host->resolve(FORSETTI_SERVICE_EVENTS);
        return e && e->publish("bench.nobody", "", 0) == FORSETTI_OK ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
        """)
    let state = dir + "/state"
    let common = ["--manifests", dir + "/manifests", "--plugins", dir + "/plugins", "--state", state]
    // Off before the host starts: the files are written when no host runs.
    let off = PeerBench.spawn(
      host, ["disable", "com.bench.late", "--manifests", dir + "/manifests", "--state", state],
      captureOutput: false)
    guard off.status == 0 else {
      progress("start in a running host: `disable` exited \(off.status)")
      return []
    }
    let h = try RunningHost(host, ["run", "--approve-all"] + common)
    defer { _ = h.terminate() }
    guard h.waitForLines(containing: "[host] watching", count: 1, seconds: 60) != nil else {
      progress("start in a running host: the host did not start")
      return []
    }
    var ours: [Double] = []
    var peer: [Double] = []
    // The control socket opens once the first round of starts is done. Asked as the command
    // line asks (`ControlClient`: the listener checked, then one typed request).
    func ask(_ command: ControlCommand) -> ControlClient.Outcome {
      ControlClient.ask(ControlRequest(command), stateDirectory: state)
    }
    var answering = false
    for _ in 0..<1000 where !answering {
      if case .answered = ask(.status) { answering = true } else { usleep(10_000) }
    }
    let started = ModuleChange(moduleID: "com.bench.late", state: "started")
    // Round 0 warms both sides and is not counted.
    for round in 0...rounds {
      let t0 = Clock.ns()
      let on = ask(.enable(module: "com.bench.late"))
      let took = Double(Clock.ns() - t0)
      if case .answered(let r) = on, case .answered(_, let changes) = r.outcome, changes.contains(started) {
        if round > 0 { ours.append(took) }
      } else {
        progress("start in a running host: enable answered \(on)")
      }
      _ = ask(.disable(module: "com.bench.late"))
      if let goPlugin {
        let go = PeerBench.spawn(
          goPlugin + "/host", ["-plugin", goPlugin + "/plugin", "-calls", "1"], captureOutput: true)
        if round > 0, go.status == 0,
          let r = try? JSONDecoder().decode(PeerBench.GoRound.self, from: Data(go.output.utf8))
        {
          peer.append(r.startNs)
        }
      }
    }
    return [
      (
        Sample(
          name:
            "isolated module started in a running host (control `enable` → start, one host call, returned)",
          perOp: ours),
        goPlugin != nil
          ? Sample(name: "go-plugin: NewClient + Client + Dispense + first net/rpc call", perOp: peer) : nil,
        "forsetti-host run as host, the zygote running; ours includes judging and writing activation.json"
      )
    ]
  }
}

/// A `forsetti-host` process whose standard output (its log lines) the bench reads.
final class RunningHost {
  let pid: pid_t
  private let output: Int32
  private var pending: [UInt8] = []
  private(set) var counted = 0
  private(set) var exitStatus: Int32?
  /// The CPU the host and every worker it reaped used, once it was reaped.
  private(set) var cpuNs: Double = .nan
  private let began = Clock.ns()

  init(_ path: String, _ arguments: [String]) throws {
    var fds: [Int32] = [-1, -1]
    guard pipe(&fds) == 0 else { throw CocoaError(.fileWriteUnknown) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
    posix_spawn_file_actions_addclose(&actions, fds[0])
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    var argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    // Plain lines on standard output, whatever journal the bench runs under.
    var env = ProcessInfo.processInfo.environment
    env["JOURNAL_STREAM"] = nil
    var envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { envp.forEach { free($0) } }
    var pid: pid_t = 0
    let status = posix_spawn(&pid, path, &actions, nil, &argv, &envp)
    close(fds[1])
    guard status == 0 else {
      close(fds[0])
      throw CocoaError(.executableLoad)
    }
    self.pid = pid
    output = fds[0]
  }

  deinit { close(output) }

  /// The time from spawn until `count` lines holding `needle` were read, or nil (timed out or
  /// the host ended first).
  func waitForLines(containing needle: String, count: Int, seconds: Double) -> Double? {
    counted = 0
    let deadline = Clock.ns() + UInt64(seconds * 1e9)
    var buffer = [UInt8](repeating: 0, count: 65536)
    let key = Array(needle.utf8)
    while counted < count {
      let now = Clock.ns()
      guard now < deadline else { return nil }
      var p = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
      guard poll(&p, 1, Int32(clamping: (deadline - now) / 1_000_000 + 1)) > 0 else { continue }
      let n = read(output, &buffer, buffer.count)
      guard n > 0 else { return nil }
      pending += buffer.prefix(n)
      while let newline = pending.firstIndex(of: 10) {
        if Self.contains(pending[..<newline], key) { counted += 1 }
        pending.removeSubrange(...newline)
      }
    }
    return Double(Clock.ns() - began)
  }

  /// SIGTERM, then the time until the host was reaped (its output drained meanwhile), or nil.
  func terminate() -> Double? {
    guard exitStatus == nil else { return nil }
    let t0 = Clock.ns()
    kill(pid, SIGTERM)
    var buffer = [UInt8](repeating: 0, count: 65536)
    while read(output, &buffer, buffer.count) > 0 {}
    var status: Int32 = 0
    var usage = rusage()
    while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
    exitStatus = status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    cpuNs = PeerBench.cpuNs(usage)
    return Double(Clock.ns() - t0)
  }

  /// The threads of process `pid` now.
  static func threads(_ pid: pid_t) -> Double {
    Double((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task"))?.count ?? 0)
  }

  private static func contains(_ line: ArraySlice<UInt8>, _ key: [UInt8]) -> Bool {
    guard line.count >= key.count, let first = key.first else { return false }
    var i = line.startIndex
    while i <= line.endIndex - key.count {
      if line[i] == first && line[i..<i + key.count].elementsEqual(key) { return true }
      i += 1
    }
    return false
  }
}
