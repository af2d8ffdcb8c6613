import Synchronization

/// One worker process started ahead of need, for `dev`: a reload or a restart then skips the
/// fork (or, without a zygote, the exec, the dynamic linking and the Swift runtime's start-up). The
/// spare has loaded nothing and confined nothing; it learns its module over its socket and only
/// then confines itself and loads it, exactly as a worker started for that module would.
///
/// Spares are started on the host's main thread, between reloads: a worker's parent-death signal
/// belongs to the thread that spawned it, so a spare started by a short-lived thread would be
/// killed when that thread ended.
final class SpareWorker: Sendable {
  private let source: WorkerSource
  private let spare = Mutex<StartedWorker?>(nil)
  private let closed = Atomic<Bool>(false)

  init(source: WorkerSource) {
    self.source = source
  }

  /// The spare, if a live one is ready.
  func take() -> StartedWorker? {
    guard let taken = removeSpare() else { return nil }
    guard taken.isRunning else {
      taken.discard()
      return nil
    }
    return taken
  }

  /// Starts a spare unless one is ready (a failure to start one is not an error: the next
  /// module gets a worker of its own, as without spares).
  func refill() {
    guard !closed.load(ordering: .acquiring), spare.withLock({ $0 == nil }) else { return }
    guard let started = try? source.start() else {
      return
    }
    let unwanted = spare.withLock { s -> StartedWorker? in
      guard s == nil, !closed.load(ordering: .acquiring) else { return started }
      s = started
      return nil
    }
    unwanted?.discard()
  }

  /// Ends the spare; no more are started.
  func shutdown() {
    closed.store(true, ordering: .releasing)
    removeSpare()?.discard()
  }

  private func removeSpare() -> StartedWorker? {
    spare.withLock { s -> StartedWorker? in
      defer { s = nil }
      return s
    }
  }
}
