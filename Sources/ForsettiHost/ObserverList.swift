import Synchronization

/// Callbacks added from any thread and called, in the order added, on the host's thread.
final class ObserverList<Value: Sendable>: Sendable {
  private let observers = Mutex<[@Sendable (Value) -> Void]>([])

  func add(_ observer: @escaping @Sendable (Value) -> Void) { observers.withLock { $0.append(observer) } }

  /// Calls every observer with `value`, outside the lock, so an observer may add another.
  func tell(_ value: Value) {
    for o in observers.withLock({ $0 }) { o(value) }
  }
}
