import Foundation
import Synchronization

/// One worker process started ahead of need, for `dev`: a reload or a restart then skips the
/// exec, the dynamic linking and the Swift runtime's start-up (most of a worker's start). The
/// spare has loaded nothing and confined nothing; it learns its module over its socket and only
/// then confines itself and loads it, exactly as a worker started for that module would.
final class SpareWorker: Sendable {
  private let executable: String
  private let spare = Mutex<StartedWorker?>(nil)
  private let refilling = Atomic<Bool>(false)
  private let closed = Atomic<Bool>(false)

  init(executable: String) {
    self.executable = executable
  }

  /// The spare, if a live one is ready; a new one is started in the background either way.
  func take() -> StartedWorker? {
    let taken = spare.withLock { s -> StartedWorker? in
      defer { s = nil }
      return s
    }
    refill()
    guard let taken else { return nil }
    guard taken.isRunning else {
      taken.discard()
      return nil
    }
    return taken
  }

  /// Starts a spare in the background unless one is ready or on its way.
  func refill() {
    guard !closed.load(ordering: .acquiring),
      refilling.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
    else { return }
    let executable = self.executable
    Thread { [self] in
      defer { refilling.store(false, ordering: .releasing) }
      guard let started = try? StartedWorker.spawn(executable: executable, arguments: ["--await-config"])
      else { return }
      let unwanted = spare.withLock { s -> StartedWorker? in
        guard s == nil, !closed.load(ordering: .acquiring) else { return started }
        s = started
        return nil
      }
      unwanted?.discard()
    }.start()
  }

  /// Ends the spare (and any on its way); no more are started.
  func shutdown() {
    closed.store(true, ordering: .releasing)
    let last = spare.withLock { s -> StartedWorker? in
      defer { s = nil }
      return s
    }
    last?.discard()
  }
}
