import Dispatch
import ForsettiBridge
import Synchronization

/// What the host's main thread learns from one worker's reader: a lifecycle frame its session
/// accepted, a protocol violation (the worker is already killed), or the socket closing.
enum WorkerEvent: Sendable {
  case frame(WireFrame)
  case violated(ProtocolViolation)
  /// The socket closed: the worker exited, was killed, or shut its end.
  case closed
}

/// Which of several workers spoke, and one semaphore to wait on for any of them: a thread
/// starting a thousand workers looks only at those that said something.
final class EventsWaker: Sendable {
  private let semaphore = DispatchSemaphore(value: 0)
  private let spoke = Mutex<[Int]>([])

  fileprivate func post(_ index: Int) {
    spoke.withLock { $0.append(index) }
    semaphore.signal()
  }

  /// The indices (as given to `WorkerEvents.notify`) of the queues that had events since the
  /// last call, each once.
  func take() -> [Int] {
    let taken = spoke.withLock { s -> [Int] in
      defer { s.removeAll(keepingCapacity: true) }
      return s
    }
    guard taken.count > 1 else { return taken }
    var seen = Set<Int>()
    return taken.filter { seen.insert($0).inserted }
  }

  /// Waits for a post, until `deadline` at most.
  func wait(until deadline: ContinuousClock.Instant) {
    let left = deadline - ContinuousClock.now
    guard left > .zero else { return }
    _ = semaphore.wait(timeout: .now() + .nanoseconds(WorkerEvents.nanoseconds(left)))
  }
}

/// One worker's lifecycle events, in order, with timed waits. Several queues may share one
/// `EventsWaker`, so one thread can wait for whichever of several workers speaks first.
final class WorkerEvents: Sendable {
  private let items = Mutex<[WorkerEvent]>([])
  private let ready = DispatchSemaphore(value: 0)
  private let wake = Mutex<(EventsWaker, Int)?>(nil)

  func post(_ e: WorkerEvent) {
    items.withLock { $0.append(e) }
    ready.signal()
    if let (waker, index) = wake.withLock({ $0 }) { waker.post(index) }
  }

  /// Also tell `waker` of every event from now on, as `index` (nil: no longer).
  func notify(_ waker: EventsWaker?, as index: Int = 0) {
    let pending = items.withLock { !$0.isEmpty }
    wake.withLock { $0 = waker.map { ($0, index) } }
    // Events before this call are told too: none may wait unseen.
    if pending, let waker { waker.post(index) }
  }

  /// The next event if one is waiting.
  func poll() -> WorkerEvent? {
    items.withLock { $0.isEmpty ? nil : $0.removeFirst() }
  }

  /// The next event, waiting until `deadline` at most.
  func next(until deadline: ContinuousClock.Instant) -> WorkerEvent? {
    while true {
      if let e = poll() { return e }
      let left = deadline - ContinuousClock.now
      guard left > .zero else { return nil }
      // `ready` counts posts, some already taken by `poll`: a spurious wake just loops.
      _ = ready.wait(timeout: .now() + .nanoseconds(Self.nanoseconds(left)))
    }
  }

  static func nanoseconds(_ d: Duration) -> Int {
    let (s, atto) = d.components
    guard s < Int64(Int.max / 1_000_000_000) - 1 else { return Int.max / 2 }
    return max(0, Int(s) * 1_000_000_000 + Int(atto / 1_000_000_000))
  }
}
