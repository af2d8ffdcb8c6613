import CForsettiSys
import ForsettiBridge
import Glibc
import Synchronization

/// Counts what each running module's sandbox holds on disk and brakes a worker over its quota
/// (`SandboxQuota`), on one thread of its own for every worker: a count 10 ms after a write
/// (inotify on the sandbox's directories), and at least once a second, ten a second near the
/// quota. One inotify descriptor serves every sandbox, each event's watch descriptor naming
/// whose directory it is: inotify instances are counted per user (128 by default), and one per
/// module would take them all from the user's other programs with a hundred modules. The host counts because nothing else can where it runs unprivileged:
/// project quotas and loop images need root and a filesystem prepared for them
/// (docs/operator-guide.md, "Limits", says what this bounds and what it does not).
///
/// A worker is watched from the moment it confined itself (its own `setrlimit` is behind it)
/// until it is reaped; it is held weakly, and its limit is changed only while it is unreaped
/// (`WorkerProcess.fileSizeLimit`), so a pid that became another process's is never touched.
final class SandboxQuotaMeter: Sendable {
  /// The quota of every module's sandbox, in bytes.
  let quota: UInt64
  private let report: @Sendable (_ moduleID: String, _ level: LogLevel, _ message: String) -> Void
  private let state = Mutex(State())
  /// Rung by `watch` and `shutdown`, so a new worker is counted at once.
  private let bell: Int32
  /// The inotify descriptor every sandbox's directories are watched on, or -1 (then each is
  /// counted by the clock alone).
  private let events: Int32
  /// Watch descriptors recorded per count; a sandbox of more directories has the rest counted
  /// by the clock.
  static let watchedDirectories = 4096

  private struct Watched {
    /// Names this entry for `count` to find it again: compared as a number, not through the
    /// weak reference (loading one is an atomic operation, and a thousand of them per count
    /// made the meter quadratic in the modules running).
    let serial: Int
    let moduleID: String
    let sandbox: String
    weak var worker: WorkerProcess?
    /// The watch descriptors of its directories on the meter's inotify descriptor.
    var wds: Set<Int32> = []
    var standing = SandboxQuota.Standing.under
    var due = ContinuousClock.now
    var counted = ContinuousClock.now
    /// How long the last count took.
    var walk = Duration.zero
  }

  private struct State {
    var watched: [Watched] = []
    var running = false
    var stopped = false
    var serials = 0
    /// When the watched whose workers were released are next looked for.
    var sweep = ContinuousClock.now
  }

  /// How often the meter looks for watched sandboxes whose workers were released: each look
  /// loads every weak reference, so not at every wake-up (a count of a sandbox whose worker is
  /// gone meanwhile applies nothing).
  static let sweepInterval = Duration.seconds(1)

  /// The shortest time between two counts of one sandbox that a write brought forward: 10 ms,
  /// or four times the last count's own time, so that counting a sandbox of many files while its
  /// module writes takes a fifth of a CPU at most.
  static func soonest(after walk: Duration) -> Duration { max(.milliseconds(10), walk * 4) }

  init(quota: UInt64, report: @escaping @Sendable (String, LogLevel, String) -> Void) {
    self.quota = quota
    self.report = report
    bell = forsetti_eventfd()
    events = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
  }

  deinit {
    if bell >= 0 { close(bell) }
    if events >= 0 { close(events) }
  }

  /// Counts `sandbox` for `worker` from now on (the meter's thread starts with the first).
  func watch(moduleID: String, sandbox: String, worker: WorkerProcess) {
    let start = state.withLock { s -> Bool in
      guard !s.stopped else { return false }
      s.serials += 1
      s.watched.append(Watched(serial: s.serials, moduleID: moduleID, sandbox: sandbox, worker: worker))
      defer { s.running = true }
      return !s.running
    }
    if start && !DetachedThread.start({ [self] in run() }) {
      state.withLock { $0.running = false }
      report(
        moduleID, .warning,
        "sandbox quota: no thread could be started to count its sandbox; it is not bounded")
    }
    _ = forsetti_eventfd_ring(bell)
  }

  /// Ends the meter's thread (the host is done).
  func shutdown() {
    state.withLock { $0.stopped = true }
    _ = forsetti_eventfd_ring(bell)
  }

  private func run() {
    let size = 4096
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 8)
    defer { buffer.deallocate() }
    // Made once: a count runs up to ten times a second per module.
    var walked = [Int32](repeating: 0, count: Self.watchedDirectories)
    var woken = [Int32](repeating: 0, count: size / MemoryLayout<inotify_event>.size + 1)
    while true {
      let plan = state.withLock { s -> (due: [Watched], wait: Int32)? in
        var now = ContinuousClock.now
        if s.stopped || now >= s.sweep {
          s.sweep = now + Self.sweepInterval
          let gone = s.stopped ? s.watched : s.watched.filter { $0.worker == nil }
          // A restarted module's new worker watches the same directories, so the same watch
          // descriptors: those it still has stay.
          if !gone.isEmpty {
            let kept = Set(s.watched.filter { $0.worker != nil && !s.stopped }.flatMap(\.wds))
            for w in gone { for wd in w.wds where !kept.contains(wd) { _ = inotify_rm_watch(events, wd) } }
          }
          guard !s.stopped else {
            s.watched = []
            s.running = false
            return nil
          }
          if !gone.isEmpty { s.watched.removeAll { $0.worker == nil } }
          now = ContinuousClock.now
        }
        let due = s.watched.filter { $0.due <= now }
        // Read in place: the sandboxes' entries are not copied to find the next due.
        var next: ContinuousClock.Instant?
        for i in s.watched.indices where next.map({ s.watched[i].due < $0 }) ?? true {
          next = s.watched[i].due
        }
        if let n = next, n > s.sweep { next = s.sweep }
        let ms = next.map { Int32(clamping: max(0, Int((($0 - now) / .milliseconds(1)).rounded(.up)))) }
        return (due, ms ?? -1)
      }
      guard let plan else { return }
      if !plan.due.isEmpty {
        for w in plan.due { count(w, &walked) }
        continue
      }
      var fds = [bell, events].map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
      guard poll(&fds, nfds_t(fds.count), plan.wait) > 0 else { continue }
      if fds[0].revents != 0 { _ = read(bell, buffer, 8) }
      // A write in a sandbox: count it soon, not at its next turn (drained: whose directory was
      // written matters, not which event said so).
      var written = Set<Int32>()
      if fds[1].revents != 0 {
        while true {
          let n = read(events, buffer, size)
          guard n > 0 else { break }
          let found = woken.withUnsafeMutableBufferPointer { b in
            forsetti_inotify_event_wds(buffer, n, b.baseAddress, b.count)
          }
          written.formUnion(woken.prefix(found))
        }
      }
      guard !written.isEmpty else { continue }
      state.withLock { s in
        for i in s.watched.indices where !s.watched[i].wds.isDisjoint(with: written) {
          s.watched[i].due = min(
            s.watched[i].due, max(.now, s.watched[i].counted + Self.soonest(after: s.watched[i].walk)))
        }
      }
    }
  }

  /// Counts one sandbox and applies the rule's step to its worker.
  /// `wds` is the walk's room for watch descriptors.
  private func count(_ w: Watched, _ wds: inout [Int32]) {
    var usage: UInt64 = 0
    var entries: UInt64 = 0
    let began = ContinuousClock.now
    var watched = 0
    let counted =
      wds.withUnsafeMutableBufferPointer { b in
        forsetti_disk_usage(w.sandbox, events, &usage, &entries, b.baseAddress, b.count, &watched)
      } == 0
    var standing = w.standing
    if counted, let worker = w.worker, let limit = worker.fileSizeLimit() {
      let (next, step) = SandboxQuota.next(w.standing, usage: usage, quota: quota, softLimit: limit.soft)
      standing = next
      apply(step, to: worker, w.moduleID, usage: usage)
    }
    let interval = SandboxQuota.intervalMilliseconds(usage: usage, quota: quota)
    state.withLock { s in
      guard let i = s.watched.firstIndex(where: { $0.serial == w.serial }) else {
        return
      }
      s.watched[i].standing = standing
      // Each walk watches every directory there is (a kept one gives its descriptor again): the
      // set is what this walk found, not all it ever found.
      if counted { s.watched[i].wds = Set(wds.prefix(watched)) }
      s.watched[i].counted = .now
      s.watched[i].walk = .now - began
      s.watched[i].due = .now + .milliseconds(interval)
    }
  }

  private func apply(_ step: SandboxQuota.Step, to worker: WorkerProcess, _ id: String, usage: UInt64) {
    let held = "\(SandboxQuota.mebibytes(usage)) MiB of its \(SandboxQuota.mebibytes(quota)) MiB"
    switch step {
    case .none:
      return
    case .refuseWrites:
      guard worker.fileSizeLimit(set: .soft(0)) != nil else { return }
      report(
        id, .warning,
        "over its sandbox quota (\(held), --sandbox-quota): its writes fail (EFBIG) until it frees space")
    case .allowWrites:
      guard worker.fileSizeLimit(set: .soft(.max)) != nil else { return }
      report(id, .info, "back under its sandbox quota (\(held)): its writes are allowed again")
    case .lock:
      guard worker.fileSizeLimit(set: .both(0)) != nil else { return }
      report(
        id, .error,
        "raised its own file-size limit while over its sandbox quota (\(held)): every write is refused "
          + "until the module restarts")
    }
  }
}

/// A change to a worker's RLIMIT_FSIZE: the soft limit (up to the hard one), or both.
enum FileSizeChange {
  case soft(UInt64)
  case both(UInt64)
}
