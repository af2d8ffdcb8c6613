import CForsetti
import CForsettiSys

/// A page the host shares with one worker only (after its call and serve rings, in the memfd of
/// fd 4): the worker's own account of its role calls, which no other worker can write. The
/// host judges by it what another module must not be able to forge — whether a provider's
/// handlers are all busy and since when (the hung verdict, a cycle's full providers), and which
/// roles a module waits on (a cycle's edges) — so a consumer scribbling on a channel it shares
/// with a provider changes nothing the host decides about that provider. What a worker writes
/// here is still its own claim about itself: a lie moves only how its own module is judged.
package struct WorkerProgress: @unchecked Sendable {
  // @unchecked: a view of shared memory; every word is read and written through the atomics
  // of forsetti_ring.h, and each handler slot has one writer (its handler thread).
  private let base: UnsafeMutablePointer<UInt32>

  /// The page's size.
  package static let size = 4096
  /// Handler slots: one per handler thread, up to the largest concurrency.
  package static let slots = Int(FORSETTI_ROLE_MAX_CONCURRENCY)
  private static let roles = 8
  private static let firstSlot = 16
  private static let slotWords = 6

  init(_ base: UnsafeMutableRawPointer) { self.base = base.assumingMemoryBound(to: UInt32.self) }

  // MARK: the worker's side

  /// A thread of the module starts (+1) or ends (-1) waiting on a call of the role of index
  /// `role` (its channel's, as a consumer).
  package func waiting(on role: Int, _ delta: Int32) {
    guard role >= 0, role < Self.roles else { return }
    _ = forsetti_fetch_add(base + role, UInt32(bitPattern: delta))
  }

  /// Handler slot `slot` begins a call at `started` with `deadline` (CLOCK_MONOTONIC ns).
  package func begin(_ slot: Int, started: UInt64, deadline: UInt64) {
    guard slot >= 0, slot < Self.slots else { return }
    let p = base + Self.firstSlot + slot * Self.slotWords
    store(p + 2, started)
    store(p + 4, deadline)
    forsetti_store_seq_cst(p, 1)
  }

  /// Handler slot `slot` has answered its call.
  package func end(_ slot: Int) {
    guard slot >= 0, slot < Self.slots else { return }
    forsetti_store_seq_cst(base + Self.firstSlot + slot * Self.slotWords, 0)
  }

  // MARK: the host's side

  /// How many threads of the module wait on the role of index `role`.
  package func waits(on role: Int) -> UInt32 {
    guard role >= 0, role < Self.roles else { return 0 }
    return forsetti_load_seq_cst(base + role)
  }

  /// The calls its handlers are in now: when each began and its deadline.
  package var busy: [(started: UInt64, deadline: UInt64)] {
    (0..<Self.slots).compactMap { slot in
      let p = base + Self.firstSlot + slot * Self.slotWords
      guard forsetti_load_seq_cst(p) != 0 else { return nil }
      return (load(p + 2), load(p + 4))
    }
  }

  private func store(_ p: UnsafeMutablePointer<UInt32>, _ v: UInt64) {
    forsetti_store_release(p, UInt32(truncatingIfNeeded: v))
    forsetti_store_release(p + 1, UInt32(truncatingIfNeeded: v >> 32))
  }

  private func load(_ p: UnsafeMutablePointer<UInt32>) -> UInt64 {
    UInt64(forsetti_load_acquire(p)) | UInt64(forsetti_load_acquire(p + 1)) << 32
  }
}
