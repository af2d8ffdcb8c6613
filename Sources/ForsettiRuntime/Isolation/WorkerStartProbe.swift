import ForsettiBridge
import Glibc

/// For `forsetti-bench`: how long a new worker takes to start, from asking for it until it
/// first answers, with and without the zygote. The worker is sent a configuration of no
/// protocol version, which it refuses at once and exits (nothing confined, nothing loaded), so
/// this is the process's own start: fork or posix_spawn, then (spawned only) exec, dynamic
/// linking and the Swift runtime's start-up.
package final class WorkerStartProbe {
  private let source: WorkerSource

  package init(executable: String, zygote: Bool) {
    source = WorkerSource(executable: executable, forks: zygote)
    source.prepare()
  }

  deinit { source.shutdown() }

  /// Why the probe's workers are spawned though a zygote was asked for, if they are.
  package var zygoteUnavailable: String? { source.zygoteUnavailable }

  /// Nanoseconds from asking for a worker to its first frame; nil if it never answered.
  package func firstAnswer() -> Double? {
    let t0 = ContinuousClock.now
    guard let worker = try? source.start() else { return nil }
    defer { worker.discard() }
    worker.socket.send(WireFrame(.configure, [.string("{}")]))
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Wire.maxFrame, alignment: 8)
    defer { buffer.deallocate() }
    guard case .frame(let f) = worker.socket.receive(into: buffer), f.kind == .loadFailed else { return nil }
    let d = ContinuousClock.now - t0
    return Double(d.components.seconds) * 1e9 + Double(d.components.attoseconds / 1_000_000_000)
  }
}
