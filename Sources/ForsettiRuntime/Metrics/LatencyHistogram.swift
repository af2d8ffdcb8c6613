import Synchronization

/// A fixed-bucket histogram of durations in nanoseconds, lock-free: recording is two relaxed
/// atomic adds and a short scan of the bounds. Buckets run 1 µs … 1 s, ×4 each (a host call
/// served from the ring takes about a microsecond; one that blocks may take long).
package final class LatencyHistogram: Sendable {
  /// Upper bounds of the buckets in nanoseconds; `+Inf` is implied past the last.
  package static let bounds: [UInt64] = [
    1_000, 4_000, 16_000, 64_000, 256_000, 1_024_000, 4_096_000, 16_384_000, 65_536_000, 262_144_000,
    1_048_576_000,
  ]
  /// Per bucket (not cumulative), then one past the last bound; a box each, since an atomic
  /// cannot be an array's element.
  private let counts: [Count]
  private final class Count: Sendable { let value = Atomic<UInt64>(0) }
  private let sumNanoseconds = Atomic<UInt64>(0)

  package init() {
    counts = (0...Self.bounds.count).map { _ in Count() }
  }

  /// Counts one duration.
  package func record(nanoseconds: UInt64) {
    var i = 0
    while i < Self.bounds.count && nanoseconds > Self.bounds[i] { i += 1 }
    counts[i].value.add(1, ordering: .relaxed)
    sumNanoseconds.add(nanoseconds, ordering: .relaxed)
  }

  /// Adds `count` durations to bucket `i` (the index of `bounds`, or past it): counts a worker
  /// kept itself (a provider's queue waits, `ChannelRing`), whose sum comes apart.
  func add(bucket i: Int, count: UInt64) {
    guard count > 0 else { return }
    counts[min(max(0, i), counts.count - 1)].value.add(count, ordering: .relaxed)
  }

  /// Adds to the sum of the durations counted (`add(bucket:count:)`).
  func add(sumNanoseconds sum: UInt64) { sumNanoseconds.add(sum, ordering: .relaxed) }

  /// Cumulative counts per bound (the last for `+Inf`, the total), and the sum in nanoseconds.
  package func snapshot() -> (cumulative: [UInt64], sumNanoseconds: UInt64) {
    var running: UInt64 = 0
    let cumulative = counts.map { c -> UInt64 in
      running &+= c.value.load(ordering: .relaxed)
      return running
    }
    return (cumulative, sumNanoseconds.load(ordering: .relaxed))
  }
}
