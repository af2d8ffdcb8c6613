import Glibc

/// A lock for state that many threads of a worker touch on every role call (the provider's
/// queue and handler slots, the consumer's lanes). Not `Synchronization.Mutex`: on Linux a
/// contended `Mutex` spins about a thousand pause instructions, then takes a
/// priority-inheritance futex whose unlock hands the lock to a waiter that is not running yet.
/// With more threads than CPUs — a provider of concurrency 16 on two — the spinners held the
/// CPUs the owner needed to finish, and the hand-off made every other thread wait for a wake-up:
/// 200 µs of the provider's CPU a call, measured with `perf` (`scripts/bench --only roles`). A
/// glibc mutex of the default kind sleeps at once and lets a running thread take it.
package final class SleepingLock<State> {
  private let mutex: UnsafeMutablePointer<pthread_mutex_t>
  private var state: State

  package init(_ state: State) {
    mutex = .allocate(capacity: 1)
    mutex.initialize(to: pthread_mutex_t())
    pthread_mutex_init(mutex, nil)
    self.state = state
  }

  deinit {
    pthread_mutex_destroy(mutex)
    mutex.deinitialize(count: 1)
    mutex.deallocate()
  }

  /// Runs `body` with the state, no other thread inside meanwhile.
  package func withLock<R>(_ body: (inout State) throws -> R) rethrows -> R {
    pthread_mutex_lock(mutex)
    defer { pthread_mutex_unlock(mutex) }
    return try body(&state)
  }
}

// Safe to share when the state is: `state` is read and written only inside `withLock`, under
// `mutex`, which lives at a fixed address of its own (a pthread_mutex_t must not move).
extension SleepingLock: @unchecked Sendable where State: Sendable {}
