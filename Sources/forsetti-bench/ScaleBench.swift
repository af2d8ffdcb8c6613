import Dispatch
import ForsettiRuntime
import Foundation
import Glibc
import Synchronization

/// Many isolated modules in one host (issue 30's scale rows): all started, the host's threads
/// and RSS with all of them running, all stopped; beside go-plugin's host starting and killing
/// as many plugins, when the peer is built (`--peers`), else beside the C floor of as many
/// `posix_spawn`s of /bin/true.
enum ScaleBench {
  /// The Go host's report of one `-many N` run.
  struct GoMany: Decodable {
    var startNs: Double
    var stopNs: Double
    var threads: Double
    var rssKiB: Double
    var started: Double
  }

  typealias Row = (figure: Sample, baseline: Sample?, note: String)

  static func run(count: Int, rounds: Int, work: String, include: String, goPlugin: String?, floors: Floors)
    throws -> [Row]
  {
    let dir = work + "/scale"
    try install(count: count, in: dir, include: include)
    sync()
    var ours = (start: [Double](), stop: [Double](), threads: [Double](), rss: [Double]())
    var peer = (start: [Double](), stop: [Double](), threads: [Double](), rss: [Double]())
    var spawnFloor: [Double] = []
    let before = threads()
    for _ in 0..<rounds {
      let t0 = Clock.ns()
      let m = try Fixtures.start(dir, log: MemoryLogSink(), mode: ZygoteBench.settings(zygote: true))
      let started = Double(Clock.ns() - t0)
      let running = (0..<count).filter { m.workerPID("com.bench.scale\($0)") != nil }.count
      let t = threads()
      let rss = Fixtures.rssKiB(getpid()) * 1024
      let t1 = Clock.ns()
      m.stopAll()
      let stopped = Double(Clock.ns() - t1)
      if running == count {
        ours.start.append(started)
        ours.stop.append(stopped)
        ours.threads.append(t)
        ours.rss.append(rss)
      } else {
        FileHandle.standardError.write(Data("bench: scale: only \(running) of \(count) workers ran\n".utf8))
      }
      if let goPlugin {
        let go = PeerBench.spawn(
          goPlugin + "/host", ["-plugin", goPlugin + "/plugin", "-many", "\(count)"], captureOutput: true)
        if go.status == 0, let r = try? JSONDecoder().decode(GoMany.self, from: Data(go.output.utf8)) {
          peer.start.append(r.startNs)
          peer.stop.append(r.stopNs)
          peer.threads.append(r.threads)
          peer.rss.append(r.rssKiB * 1024)
        } else {
          FileHandle.standardError.write(
            Data("bench: scale: the go-plugin host failed (\(go.status))\n".utf8))
        }
      } else if let f = floors.spawnTrue(count) {
        spawnFloor.append(f * Double(count))
      }
    }
    let n = "\(count) isolated modules"
    if goPlugin != nil {
      return [
        (
          Sample(name: "\(n) all started (activate → every start returned)", perOp: ours.start),
          Sample(name: "go-plugin: \(count) plugins started at once, each called once", perOp: peer.start),
          "target ≤ 1.5 s (issue 30)"
        ),
        (
          Sample(name: "\(n) all stopped (stopAll)", perOp: ours.stop),
          Sample(name: "go-plugin: \(count) plugins killed at once", perOp: peer.stop),
          "target ≤ go-plugin's time (issue 30)"
        ),
        (
          Sample(name: "host threads (count), \(n) running", perOp: ours.threads),
          Sample(name: "go-plugin host threads (count), \(count) plugins running", perOp: peer.threads),
          "the bench's own process as host, \(Int(before)) threads before; target ≤ 32 (issue 30)"
        ),
        (
          Sample(name: "host RSS (bytes), \(n) running", perOp: ours.rss),
          Sample(name: "go-plugin host RSS (bytes), \(count) plugins running", perOp: peer.rss),
          "VmRSS of the host process alone (the bench's own heap included)"
        ),
      ]
    }
    return [
      (
        Sample(name: "\(n) all started (activate → every start returned)", perOp: ours.start),
        Sample(name: "C floor: \(count) posix_spawns of /bin/true, one after another", perOp: spawnFloor),
        "target ≤ 1.5 s (issue 30); --peers puts go-plugin here"
      ),
      (Sample(name: "\(n) all stopped (stopAll)", perOp: ours.stop), nil, "--peers puts go-plugin beside it"),
      (
        Sample(name: "host threads (count), \(n) running", perOp: ours.threads), nil,
        "the bench's own process as host, \(Int(before)) threads before; target ≤ 32 (issue 30)"
      ),
      (Sample(name: "host RSS (bytes), \(n) running", perOp: ours.rss), nil, "VmRSS of the host process"),
    ]
  }

  /// The threads of this process now.
  static func threads() -> Double {
    Double((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task"))?.count ?? 0)
  }

  /// `count` trivial modules, compiled two at a time (each its own entry symbol and identity).
  static func install(count: Int, in dir: String, include: String) throws {
    for sub in ["/plugins", "/manifests"] {
      try FileManager.default.createDirectory(atPath: dir + sub, withIntermediateDirectories: true)
    }
    let failures = Failures()
    DispatchQueue.concurrentPerform(iterations: 2) { lane in
      for n in stride(from: lane, to: count, by: 2) {
        let m = Fixtures.module(
          id: "com.bench.scale\(n)", entry: "scale\(n)_entry", start: "return FORSETTI_OK;")
        do { try Fixtures.install(m, in: dir, include: include) } catch { failures.add() }
      }
    }
    if failures.count > 0 {
      FileHandle.standardError.write(Data("bench: scale: \(failures.count) modules failed to build\n".utf8))
    }
  }

  /// Build failures counted from both lanes.
  final class Failures: Sendable {
    private let value = Mutex(0)
    func add() { value.withLock { $0 += 1 } }
    var count: Int { value.withLock { $0 } }
  }
}
