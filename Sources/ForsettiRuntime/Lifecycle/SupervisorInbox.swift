import Synchronization

/// Worker exits reported from their reader threads, for the main thread to handle.
final class SupervisorInbox: Sendable {
  private let exited = Mutex<[(moduleID: String, pid: Int32)]>([])
  private let wake = Mutex<(@Sendable () -> Void)?>(nil)

  /// Calls `w` at each exit from now on, and at once for exits posted before it was set (a
  /// worker handed over by an image before this one can end before the host's loop runs).
  func setWake(_ w: @escaping @Sendable () -> Void) {
    wake.withLock { $0 = w }
    if !exited.withLock({ $0.isEmpty }) { w() }
  }

  func post(_ moduleID: String, pid: Int32) {
    exited.withLock { $0.append((moduleID, pid)) }
    wake.withLock { $0 }?()
  }

  func drain() -> [(moduleID: String, pid: Int32)] {
    exited.withLock { e in
      defer { e.removeAll() }; return e
    }
  }
}
