import CForsettiSys
import Dispatch
import ForsettiRuntime
import Glibc
import Synchronization

/// The host's sleep between rounds: until SIGINT/SIGTERM (once `catchSignals` was called), a
/// wake-up (supervision has work, a control request waits, a stop was requested), or a time.
final class SignalWaiter: Sendable {
  private let semaphore = DispatchSemaphore(value: 0)
  /// Readable whenever a wake-up came since `drain`: an application's own loop polls it
  /// (`ForsettiHost.wakeDescriptor`), as `wait` waits on the semaphore.
  private let ring = WakeDescriptor()

  /// The descriptor; -1 only if the kernel refused one (a loop then falls back to `nextDue`).
  var descriptor: Int32 { ring.fd }
  private let sources = Mutex<[any DispatchSourceSignal]>([])
  private let received = ReceivedSignal()

  /// Makes SIGINT and SIGTERM end `wait` from now on; the second of them exits the process at
  /// once. Idempotent.
  func catchSignals() {
    sources.withLock { sources in
      guard sources.isEmpty else { return }
      let signals = [SIGINT, SIGTERM]
      for sig in signals {
        // Not SIG_IGN: Dispatch installs its own handler only once the source is registered, on
        // its own thread, and a signal ignored meanwhile would be lost (a SIGTERM right after
        // start left the host running). The latch keeps it until then.
        SignalLatch.install(sig)
        sources.append(DispatchSource.makeSignalSource(signal: sig, queue: .global()))
      }
      // Dispatch says when a source is in place (its registration handler runs after its own
      // signal handler replaced the latch): waiting on that, not polling the handler in 1 ms
      // sleeps, keeps the host's start from paying a millisecond or two for it.
      let registered = DispatchGroup()
      for (s, sig) in zip(sources, signals) {
        registered.enter()
        s.setRegistrationHandler { registered.leave() }
        s.setEventHandler { [semaphore, received] in Self.deliver(sig, semaphore, received) }
        s.resume()
      }
      // Bounded, should Dispatch never say so; then whatever the latch caught counts as received.
      _ = registered.wait(timeout: .now() + .seconds(2))
      for sig in signals where SignalLatch.caught(sig) { Self.deliver(sig, semaphore, received) }
    }
  }

  private static func deliver(_ sig: Int32, _ semaphore: DispatchSemaphore, _ received: ReceivedSignal) {
    let again = received.value.withLock { r in
      defer { r = sig }
      return r != nil
    }
    if again {
      // A second Ctrl-C means "now": a module stuck in start or stop must not hold the host.
      let text = "forsetti-host: second signal, exiting without waiting for modules\n"
      _ = text.withCString { write(2, $0, strlen($0)) }
      _exit(130)
    }
    semaphore.signal()
  }

  /// Wakes `wait` without a signal; callable from any thread.
  var waker: @Sendable () -> Void {
    { [semaphore, ring] in
      semaphore.signal()
      _ = forsetti_eventfd_ring(ring.fd)
    }
  }

  /// Empties the descriptor: what woke it is being handled now.
  func drain() {
    var count: UInt64 = 0
    _ = read(ring.fd, &count, 8)
  }

  /// Sleeps until a signal (returns its name), a wake-up or `until` (returns nil).
  /// Whether SIGINT or SIGTERM came (and `wait` will return it): a handover checks it last.
  var signalled: Bool { received.value.withLock { $0 != nil } }

  func wait(until: ContinuousClock.Instant?) -> String? {
    if let until {
      let left = until - ContinuousClock.now
      // At most a day at a time (the caller loops): a far deadline must not overflow the product.
      let seconds = min(max(left.components.seconds, 0), 86_400)
      let ns = max(0, Int(seconds) * 1_000_000_000 + Int(left.components.attoseconds / 1_000_000_000))
      _ = semaphore.wait(timeout: .now() + .nanoseconds(ns))
    } else {
      semaphore.wait()
    }
    guard let sig = received.value.withLock({ $0 }) else { return nil }
    return sig == SIGTERM ? "SIGTERM" : "SIGINT"
  }
}

/// The signal that ended the wait, shared with the signal handlers.
final class ReceivedSignal: Sendable {
  let value = Mutex<Int32?>(nil)
}

/// A non-blocking eventfd, closed on exec, closed when the last holder lets go: every waker holds
/// it, so one called after the host was released (a watcher's thread finishing) rings a
/// descriptor still its own, never a number the application's next file was given.
final class WakeDescriptor: Sendable {
  let fd: Int32 = forsetti_eventfd()

  deinit { if fd >= 0 { close(fd) } }
}
