import Dispatch
import ForsettiRuntime
import Foundation
import Glibc
import Synchronization

/// The fixtures of the many-module rows (issue 30; measured on `forsetti-host run` by
/// `HostRunBench.scale` since issue 44), and go-plugin's report of the same.
enum ScaleBench {
  /// The Go host's report of one `-many N` run.
  struct GoMany: Decodable {
    var startNs: Double
    var stopNs: Double
    var threads: Double
    var rssKiB: Double
    var started: Double
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
