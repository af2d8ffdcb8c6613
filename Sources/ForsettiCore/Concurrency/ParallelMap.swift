import Dispatch
import Glibc
import Synchronization

/// Index-ordered parallel map for work that is independent per item: reading and decoding a
/// thousand manifests, inspecting a thousand binaries, judging a thousand modules.
///
/// The items are split into one contiguous range per worker (their costs are alike), so the
/// result never depends on scheduling. Small inputs run on the calling thread: below
/// `minimumPerWorker` items a second thread costs more than it saves.
public enum ParallelMap {
  /// Online processors, read once.
  public static let processors: Int = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))

  private static let limit = Atomic<Int>(0)

  /// Caps the threads any map uses (0: one per processor). The benchmark measures gating with
  /// one thread and with all, to show what the parallelism itself buys.
  public static func limitWorkers(to n: Int) { limit.store(max(0, n), ordering: .relaxed) }

  static var workerLimit: Int {
    let n = limit.load(ordering: .relaxed)
    return n > 0 ? min(n, processors) : processors
  }

  /// `body(i)` for every `i` in `0..<count`, in index order.
  public static func map<T: Sendable>(
    _ count: Int, minimumPerWorker: Int = 64, _ body: @Sendable (Int) -> T
  ) -> [T] {
    let workers = min(workerLimit, count / max(1, minimumPerWorker))
    guard workers > 1 else { return (0..<count).map(body) }
    let slots = Slots<T>(count: count)
    defer { slots.deallocate() }
    DispatchQueue.concurrentPerform(iterations: workers) { w in
      for i in (count * w / workers)..<(count * (w + 1) / workers) { slots.put(body(i), at: i) }
    }
    return slots.collect()
  }
}

/// Result slots written concurrently, one writer per index.
///
/// `@unchecked Sendable` is safe here because every index is written by exactly one worker (the
/// ranges are disjoint), and the slots are read only after `concurrentPerform` has returned,
/// which orders all the workers' writes before the read.
private final class Slots<T>: @unchecked Sendable {
  private let base: UnsafeMutablePointer<T>
  private let count: Int

  init(count: Int) {
    self.count = count
    base = .allocate(capacity: count)
  }

  func put(_ value: T, at i: Int) { (base + i).initialize(to: value) }

  /// Moves every value out; each slot must have been put exactly once.
  func collect() -> [T] {
    Array(unsafeUninitializedCapacity: count) { buffer, n in
      buffer.baseAddress?.moveInitialize(from: base, count: count)
      n = count
    }
  }

  func deallocate() { base.deallocate() }
}
