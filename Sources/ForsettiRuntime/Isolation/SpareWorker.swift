import ForsettiBridge
import Synchronization

/// One worker process started ahead of need, for `dev`: a reload or a restart then skips the
/// fork (or, without a zygote, the exec, the dynamic linking and the Swift runtime's start-up)
/// and the cgroup join. The spare has loaded nothing and confined nothing; it learns its module
/// over its socket and only then confines itself and loads it, exactly as a worker started for
/// that module would.
///
/// When the host has cgroups the spare is put in a cgroup of its own (`spare-N`, with the limits
/// every worker gets) before it is offered: joining one waits for an RCU grace period in the
/// kernel (about 10 ms after a quiet spell, measured), which a reload then does not wait for. A
/// spare has run no code of any module, so joining early changes nothing of what the cgroup
/// accounts.
///
/// Spares are started on the host's main thread, between reloads: a spawned worker's
/// parent-death signal belongs to the thread that spawned it, so a spare started by a
/// short-lived thread would be killed when that thread ended.
final class SpareWorker: Sendable {
  /// A spare and the cgroup it is already in (nil without cgroups).
  struct Spare: Sendable {
    let worker: StartedWorker
    let cgroup: WorkerCgroup?
  }

  private let source: WorkerSource
  /// Makes a cgroup for a spare and moves it in; nil when the host has none (or that failed:
  /// the worker is then placed as any other, when it is given a module).
  private let place: @Sendable (Int32) -> WorkerCgroup?
  private let slot = Mutex<Slot>(Slot())
  private let closed = Atomic<Bool>(false)

  private struct Slot {
    var spare: Spare?
    /// A spare being placed in its cgroup, not yet offered.
    var placing = false
  }

  init(source: WorkerSource, place: @escaping @Sendable (Int32) -> WorkerCgroup?) {
    self.source = source
    self.place = place
  }

  /// The spare, if a live one is ready.
  func take() -> Spare? {
    guard let taken = removeSpare() else { return nil }
    guard taken.worker.isRunning else {
      Self.discard(taken)
      return nil
    }
    return taken
  }

  /// Starts a spare unless one is ready or on its way (a failure to start one is not an error:
  /// the next module gets a worker of its own, as without spares). Placing it in its cgroup
  /// happens on a thread of its own; it is offered once placed.
  func refill() {
    let wanted = slot.withLock { s -> Bool in
      guard !closed.load(ordering: .acquiring), s.spare == nil, !s.placing else { return false }
      s.placing = true
      return true
    }
    guard wanted else { return }
    guard let started = try? source.start() else {
      slot.withLock { $0.placing = false }
      return
    }
    let placed = DetachedThread.start { [self] in
      let spare = Spare(worker: started, cgroup: place(started.pid))
      let unwanted = slot.withLock { s -> Spare? in
        s.placing = false
        guard s.spare == nil, !closed.load(ordering: .acquiring) else { return spare }
        s.spare = spare
        return nil
      }
      if let unwanted { Self.discard(unwanted) }
    }
    // No thread for the placing: the spare is not offered, and the next refill tries again.
    if !placed {
      slot.withLock { $0.placing = false }
      started.discard()
    }
  }

  /// Ends the spare; no more are started.
  func shutdown() {
    closed.store(true, ordering: .releasing)
    if let s = removeSpare() { Self.discard(s) }
  }

  private func removeSpare() -> Spare? {
    slot.withLock { s -> Spare? in
      defer { s.spare = nil }
      return s.spare
    }
  }

  private static func discard(_ s: Spare) {
    s.worker.discard()
    if let cgroup = s.cgroup { WorkerCgroupHold.release(cgroup) }
  }
}
