import CForsetti
import CForsettiSys
import Glibc

/// A role channel: the lanes one consumer's calls take to one provider's worker, in one memfd
/// the host creates, passes to both workers and keeps mapped itself (to see the calls in flight:
/// `RoleChannels`). Each lane is a `CallRing` carrying one call at a time, so a consumer has at
/// most as many calls outstanding at the provider as the channel has lanes — the provider's
/// declared concurrency plus FORSETTI_ROLE_QUEUE_DEPTH — and a call finding none free is answered
/// FORSETTI_ERR_BUSY at once. The provider's worker watches every lane of its channels with one
/// thread, asleep on the channels' bells (a futex word each request bumps: `ChannelWatcher`), and
/// hands what it finds to its handlers (`RoleServer`).
///
/// Both workers write the whole mapping: the header's counters are each end's claim about
/// itself (the consumer's busy and timed-out calls, the provider's queue waits), read by the
/// host only as far as a step forward of less than 2^31.
package final class ChannelRing: Sendable {
  /// The header before the lanes: the bell, the provider's asleep flag, the counters.
  package static let headerSize = 4096
  /// The most lanes a channel has: the largest concurrency plus the queue.
  package static let maxLanes = Int(FORSETTI_ROLE_MAX_CONCURRENCY + FORSETTI_ROLE_QUEUE_DEPTH)
  /// Queue-wait buckets (upper bounds in nanoseconds: 1 µs × 4^i), the last one open.
  package static let waitBuckets = 12

  private enum Word: Int {
    case bell = 0, providerAsleep, busy, timedOut, waitCount, waitSumLow, waitSumHigh
    case firstBucket = 8
  }

  package let lanes: [CallRing]
  private let mapping: RingMapping

  private init(mapping: RingMapping, lanes count: Int) {
    self.mapping = mapping
    let bell = mapping.base.assumingMemoryBound(to: UInt32.self)
    lanes = (0..<count).map {
      CallRing(
        mapping: mapping, offset: Self.headerSize + $0 * CallRing.size, serves: nil,
        bell: bell + Word.bell.rawValue)
    }
  }

  private static func bytes(lanes: Int) -> Int { headerSize + lanes * CallRing.size }

  /// A new channel of `lanes` lanes (clamped to 1…`maxLanes`) and its descriptor, which the host
  /// passes to both workers and then closes. Sealed at its size: neither worker can shrink it.
  package static func create(lanes: Int) -> (ring: ChannelRing, fd: Int32)? {
    let count = min(max(1, lanes), maxLanes)
    let fd = forsetti_memfd("forsetti-role-channel", UInt64(bytes(lanes: count)))
    guard fd >= 0 else { return nil }
    guard let ring = map(fd, count, keeping: fcntl(fd, F_DUPFD_CLOEXEC, 3)) else {
      Glibc.close(fd)
      return nil
    }
    return (ring, fd)
  }

  /// A worker's side of a channel the host passed as `fd` (which the caller closes): its lanes
  /// are counted from its size, which must be whole.
  package static func attach(fd: Int32) -> ChannelRing? {
    guard let count = lanes(fd) else { return nil }
    return map(fd, count)
  }

  /// The host's side of a channel handed over by the image before it (`fd`, now owned by the
  /// channel).
  package static func adopt(fd: Int32) -> ChannelRing? {
    guard let count = lanes(fd) else { return nil }
    return map(fd, count, keeping: fd)
  }

  /// The host's descriptor of the channel's memory (-1: none kept).
  package var descriptor: Int32 { mapping.descriptor }

  private static func lanes(_ fd: Int32) -> Int? {
    var st = stat()
    guard fstat(fd, &st) == 0 else { return nil }
    let size = Int(st.st_size)
    guard size > headerSize, (size - headerSize) % CallRing.size == 0 else { return nil }
    let count = (size - headerSize) / CallRing.size
    guard count >= 1, count <= maxLanes else { return nil }
    return count
  }

  private static func map(_ fd: Int32, _ count: Int, keeping kept: Int32 = -1) -> ChannelRing? {
    let size = bytes(lanes: count)
    let p = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
    guard let p, p != MAP_FAILED else {
      if kept >= 0, kept != fd { Glibc.close(kept) }
      return nil
    }
    return ChannelRing(mapping: RingMapping(base: p, size: size, descriptor: kept), lanes: count)
  }

  private func word(_ w: Word, _ plus: Int = 0) -> UnsafeMutablePointer<UInt32> {
    mapping.base.assumingMemoryBound(to: UInt32.self) + w.rawValue + plus
  }

  package var isClosed: Bool { lanes[0].isClosed }

  /// Ends every call on the channel and wakes the provider's thread: a module went.
  package func close() {
    for lane in lanes { lane.close() }
    _ = forsetti_fetch_add(word(.bell), 1)
    _ = forsetti_futex_wake(word(.bell), Int32.max)
  }

  /// Rings the bell without a request: a call was withdrawn, for the provider's thread to answer
  /// at once (so its lane is free again).
  package func ringBell() {
    _ = forsetti_fetch_add(word(.bell), 1)
    if forsetti_load_seq_cst(word(.providerAsleep)) != 0 { _ = forsetti_futex_wake(word(.bell), 1) }
  }

  // MARK: the provider's thread

  /// The bell's count now: read before looking at the lanes, then passed to `sleep`.
  package var bell: UInt32 { forsetti_load_seq_cst(word(.bell)) }

  /// The bell itself, for a watcher asleep on many channels' bells at once (`ChannelWatcher`).
  package var bellWord: UnsafeMutablePointer<UInt32> { word(.bell) }

  /// Raises (before sleeping on the bell) or lowers the provider's asleep flag: a consumer wakes
  /// the bell's sleepers only while it is raised.
  package func providerAsleep(_ asleep: Bool) {
    if asleep {
      forsetti_store_seq_cst(word(.providerAsleep), 1)
    } else {
      forsetti_store_release(word(.providerAsleep), 0)
    }
  }

  // MARK: counters, each end's claim about itself

  /// A call of the consumer was answered FORSETTI_ERR_BUSY (no lane free).
  package func countBusy() { _ = forsetti_fetch_add(word(.busy), 1) }
  /// A call of the consumer timed out (queued or running).
  package func countTimedOut() { _ = forsetti_fetch_add(word(.timedOut), 1) }

  /// A call waited `nanoseconds` in the provider's queue before a handler began it.
  package func countWait(_ nanoseconds: UInt64) {
    var bound: UInt64 = 1_000
    var i = 0
    while i < Self.waitBuckets - 1, nanoseconds > bound {
      bound &*= 4
      i += 1
    }
    _ = forsetti_fetch_add(word(.firstBucket, i), 1)
    _ = forsetti_fetch_add(word(.waitCount), 1)
    let micro = UInt32(clamping: nanoseconds / 1_000)
    let low = forsetti_fetch_add(word(.waitSumLow), micro)
    if low &+ micro < low { _ = forsetti_fetch_add(word(.waitSumHigh), 1) }
  }

  /// The counters as the two workers wrote them.
  package struct Counters: Sendable, Equatable {
    package var busy: UInt32 = 0
    package var timedOut: UInt32 = 0
    package var waits: [UInt32] = Array(repeating: 0, count: ChannelRing.waitBuckets)
    /// The sum of the waits in microseconds (wrapping at 2^64).
    package var waitSumMicroseconds: UInt64 = 0
    package init() {}
  }

  package var counters: Counters {
    var c = Counters()
    c.busy = forsetti_load_acquire(word(.busy))
    c.timedOut = forsetti_load_acquire(word(.timedOut))
    for i in 0..<Self.waitBuckets { c.waits[i] = forsetti_load_acquire(word(.firstBucket, i)) }
    c.waitSumMicroseconds =
      UInt64(forsetti_load_acquire(word(.waitSumLow))) | UInt64(forsetti_load_acquire(word(.waitSumHigh)))
      << 32
    return c
  }

  /// Answers published on every lane since creation, wrapping (for the provider's role calls).
  package var answered: UInt32 {
    lanes.reduce(UInt32(0)) { $0 &+ $1.answeredSequence }
  }
}
