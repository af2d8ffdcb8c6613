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

/// One worker's lifecycle events, in order, with timed waits. Several queues may share one
/// `wake` signal, so one thread can wait for whichever of several workers speaks first.
final class WorkerEvents: Sendable {
  private let items = Mutex<[WorkerEvent]>([])
  private let ready = DispatchSemaphore(value: 0)
  private let wake = Mutex<DispatchSemaphore?>(nil)

  func post(_ e: WorkerEvent) {
    items.withLock { $0.append(e) }
    ready.signal()
    wake.withLock { $0 }?.signal()
  }

  /// Also signal `signal` on every event from now on (nil: no longer).
  func notify(_ signal: DispatchSemaphore?) { wake.withLock { $0 = signal } }

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
