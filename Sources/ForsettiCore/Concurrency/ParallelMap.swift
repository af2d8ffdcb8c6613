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
  ///
  /// The workers write straight into the result's storage: collecting from a buffer of their
  /// own moved every element once more, into fresh pages (a judgement holds a whole manifest,
  /// so a thousand of them were a page fault every few elements).
  public static func map<T: Sendable>(
    _ count: Int, minimumPerWorker: Int = 64, _ body: @Sendable (Int) -> T
  ) -> [T] {
    let workers = min(workerLimit, count / max(1, minimumPerWorker))
    guard workers > 1 else { return (0..<count).map(body) }
    return Array(unsafeUninitializedCapacity: count) { buffer, initialized in
      guard let base = buffer.baseAddress else { return }
      let slots = Slots(base)
      DispatchQueue.concurrentPerform(iterations: workers) { w in
        for i in (count * w / workers)..<(count * (w + 1) / workers) { slots.put(body(i), at: i) }
      }
      initialized = count
    }
  }
}

/// The result's storage, written concurrently, one writer per index.
///
/// `@unchecked Sendable` is safe here because every index is written by exactly one worker (the
/// ranges are disjoint and cover every index once), and the array is handed out only after
/// `concurrentPerform` has returned, which orders all the workers' writes before any read.
private struct Slots<T>: @unchecked Sendable {
  private let base: UnsafeMutablePointer<T>

  init(_ base: UnsafeMutablePointer<T>) { self.base = base }

  /// Moves `value` into slot `i` (taken, not borrowed: a borrowed value was copied in).
  func put(_ value: consuming T, at i: Int) { (base + i).initialize(to: value) }
}
