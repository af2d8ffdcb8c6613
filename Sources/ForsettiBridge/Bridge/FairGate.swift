import CForsetti
import Dispatch
import Synchronization

/// The turn of a provider whose handler runs on its callers' threads (in the host's process), or
/// of the host's own calls into a worker's serve ring: at most `slots` callers inside at once,
/// the rest waiting in a `FairQueue` (one queue per caller, taken in turn), each for at most its
/// deadline. A caller with FORSETTI_ROLE_QUEUE_DEPTH calls waiting already is told `busy` at
/// once.
package final class FairGate: Sendable {
  /// One caller's thread waiting for its turn.
  private final class Waiter: Sendable {
    let ready = DispatchSemaphore(value: 0)
  }

  private struct State {
    var free: Int
    var queue = FairQueue<Waiter>()
  }

  private let state: Mutex<State>
  package let slots: Int
  /// Calls one caller may have waiting.
  package static let depth = Int(FORSETTI_ROLE_QUEUE_DEPTH)

  package init(slots: Int) {
    self.slots = max(1, slots)
    state = Mutex(State(free: max(1, slots)))
  }

  /// How a caller's wait for its turn ended.
  package enum Entry: Equatable, Sendable {
    /// Inside: `leave` when done.
    case entered
    /// `depth` calls of this caller wait already: nothing was queued.
    case busy
    /// The deadline passed while it waited: it never went inside.
    case expired
  }

  /// Waits for a slot as `caller`, until `deadline` (CLOCK_MONOTONIC nanoseconds).
  package func enter(_ caller: String, until deadline: UInt64) -> Entry {
    let waiter = Waiter()
    let queued = state.withLock { s -> Entry? in
      if s.free > 0, s.queue.count == 0 {
        s.free -= 1
        return .entered
      }
      return s.queue.push(caller, waiter, limit: Self.depth) ? nil : .busy
    }
    if let queued { return queued }
    let now = CallRing.nanoseconds()
    let wait = Int(clamping: deadline > now ? deadline - now : 0)
    if waiter.ready.wait(timeout: .now() + .nanoseconds(wait)) == .success { return .entered }
    // Gave up: still queued, it leaves the queue; handed a slot meanwhile, it takes it.
    let removed = state.withLock { $0.queue.remove(caller) { $0 === waiter } }
    if removed { return .expired }
    waiter.ready.wait()
    return .entered
  }

  /// Gives the slot to the next caller in turn, or frees it.
  package func leave() {
    let next = state.withLock { s -> Waiter? in
      if let w = s.queue.pop() { return w }
      s.free += 1
      return nil
    }
    next?.ready.signal()
  }

  /// Callers inside and waiting now.
  package var load: (running: Int, queued: Int) {
    state.withLock { (slots - $0.free, $0.queue.count) }
  }
}
