import Synchronization

/// Changed paths collected by a watcher thread, taken by the host's loop once they settle.
final class PendingChanges: Sendable {
  private let state = Mutex<
    (paths: Set<String>, first: ContinuousClock.Instant?, last: ContinuousClock.Instant?)
  >(([], nil, nil))

  func add(_ path: String, at: ContinuousClock.Instant) {
    state.withLock { s in
      s.paths.insert(path)
      if s.first == nil { s.first = at }
      s.last = at
    }
  }

  /// When the current burst will have settled.
  func due(after quiet: Double) -> ContinuousClock.Instant? {
    state.withLock { s in s.last.map { $0 + .wait(quiet) } }
  }

  /// The settled burst and when its first event came, or nil while it is still going on.
  func take(after quiet: Double) -> (Set<String>, ContinuousClock.Instant)? {
    state.withLock { s in
      guard let last = s.last, let first = s.first, ContinuousClock.now >= last + .wait(quiet) else {
        return nil
      }
      defer { s = ([], nil, nil) }
      return (s.paths, first)
    }
  }
}
