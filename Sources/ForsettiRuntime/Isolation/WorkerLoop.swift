import CForsettiSys
import Dispatch
import ForsettiBridge
import Glibc
import Synchronization

/// What a descriptor in the loop does when it is ready.
protocol LoopSource: AnyObject, Sendable {
  /// Handles what is ready on the descriptor (a bounded amount, so one worker cannot hold a
  /// thread); `.again` to be called when it is ready next, `.done` to be removed.
  func ready(_ thread: WorkerLoop.Thread) -> WorkerLoop.Next
}

/// The host's threads that serve every worker: one epoll set over the workers' sockets, output
/// pipes and call-ring doorbells, and a small pool of threads taking turns at it. Each entry
/// fires once and is re-armed by the thread that handled it, so one worker's frames are read in
/// order and its ring has one server at a time, with no lock per worker.
///
/// The pool is `baseThreads` threads, started with the first entry. A handler can block (a
/// role call through the host waits up to its deadline, an application's service is the
/// application's code): when a thread takes an event while every other thread is busy, one more
/// is started, up to `maxThreads`, and a thread above the base that waits a second with nothing
/// to do ends. So the host's threads follow what its workers are doing at once, never how many
/// workers there are.
package final class WorkerLoop: Sendable {
  /// The descriptor and handler behind a token.
  private struct Entry {
    let fd: Int32
    let source: any LoopSource
    /// Fires per wake-up and is never disarmed (`add(edge:)`).
    let edge: Bool
  }

  fileprivate struct Pool {
    var running = 0
    var busy = 0
    var stopping = false
    /// Threads parked by `pause`, each waiting on `unpark`.
    var parked = 0
    var pausing = false
    /// The most threads that ever ran at once.
    var peak = 0
  }

  /// What a handler asks of the loop.
  enum Next { case again, done }

  /// A thread of the pool, as its handlers see it: scratch memory of its own, and whether a
  /// spinning handler should let go.
  final class Thread: Sendable {
    /// `Wire.maxFrame` bytes for the handler running on this thread (one at a time).
    nonisolated(unsafe) let scratch: UnsafeMutableRawBufferPointer
    // nonisolated(unsafe): only the pool thread that owns this object touches the memory.
    let loop: WorkerLoop
    init(loop: WorkerLoop) {
      self.loop = loop
      scratch = .allocate(byteCount: Wire.maxFrame, alignment: 8)
    }
    deinit { scratch.deallocate() }
    /// Whether another thread waits for events: a handler may spin for its worker's next call
    /// only then, so no other worker waits behind a spin.
    var othersIdle: Bool { loop.pool.withLock { $0.busy < $0.running } }
  }

  let baseThreads: Int
  let maxThreads: Int
  private let epoll: Int32
  /// Rung to stop the pool; its token is 0.
  private let stopBell: Int32
  /// Rung to park the pool's threads (`pause`); its token is 1.
  private let pauseBell: Int32
  private static let pauseToken: UInt64 = 1
  private let unpark = DispatchSemaphore(value: 0)
  private let entries = Mutex<[UInt64: Entry]>([:])
  /// Entries' tokens start above the bells'.
  private let nextToken = Atomic<UInt64>(1)
  fileprivate let pool = Mutex(Pool())
  /// Seconds a thread above the base waits idle before it ends.
  static let idleMilliseconds: Int32 = 1000

  /// The pool of `baseThreads` (at least 1), growing to `maxThreads` while handlers block.
  package init(baseThreads: Int = WorkerLoop.defaultBase, maxThreads: Int = WorkerLoop.defaultMax) {
    self.baseThreads = max(1, baseThreads)
    self.maxThreads = max(self.baseThreads, maxThreads)
    epoll = forsetti_epoll_create()
    stopBell = forsetti_eventfd()
    pauseBell = forsetti_eventfd()
    if epoll >= 0, stopBell >= 0 { _ = forsetti_epoll_add(epoll, stopBell, 0) }
    if epoll >= 0, pauseBell >= 0 { _ = forsetti_epoll_add(epoll, pauseBell, Self.pauseToken) }
  }

  /// Two threads per CPU, between 2 and 8: enough that a spinning server and a reader never
  /// wait for each other on a small machine.
  package static var defaultBase: Int { min(8, max(2, 2 * Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))) }
  /// The most threads while handlers block: well under the thread count of one thread per worker.
  package static let defaultMax = 24

  deinit {
    if epoll >= 0 { close(epoll) }
    if stopBell >= 0 { close(stopBell) }
    if pauseBell >= 0 { close(pauseBell) }
  }

  /// Watches `fd` for `source`; the token to remove it with, or nil when the kernel refused
  /// (the caller then serves nothing and should end the worker). An entry fires once and is
  /// armed again when its handler returns `.again`; with `edge`, it fires per wake-up of the
  /// file and is never disarmed (no system call to arm it again), so its handler may run on two
  /// threads at once and must exclude itself — a call ring's doorbell, rung once per sleep.
  func add(_ fd: Int32, _ source: any LoopSource, edge: Bool = false) -> UInt64? {
    guard epoll >= 0 else { return nil }
    let token = nextToken.add(1, ordering: .relaxed).newValue
    entries.withLock { $0[token] = Entry(fd: fd, source: source, edge: edge) }
    let added = edge ? forsetti_epoll_add_edge(epoll, fd, token) : forsetti_epoll_add(epoll, fd, token)
    guard added == 0 else {
      entries.withLock { _ = $0.removeValue(forKey: token) }
      return nil
    }
    guard startIfIdle() else {
      remove(token)
      return nil
    }
    return token
  }

  /// Stops watching the entry (a handler running for it finishes; it is not called again).
  /// The caller may close the descriptor once this returns.
  func remove(_ token: UInt64) {
    // Under the lock, as re-arming is: once an entry is gone its descriptor may be closed and
    // its number reused by another entry, which a late re-arm must not touch.
    entries.withLock { e in
      if let entry = e.removeValue(forKey: token) { _ = forsetti_epoll_remove(epoll, entry.fd) }
    }
  }

  private func rearm(_ token: UInt64) {
    entries.withLock { e in
      if let entry = e[token] { _ = forsetti_epoll_rearm(epoll, entry.fd, token) }
    }
  }

  /// How many threads serve now, and the most that ever did.
  package var threads: (running: Int, peak: Int) { pool.withLock { ($0.running, $0.peak) } }

  /// Ends the pool's threads (entries still watched are no longer served).
  package func shutdown() {
    let running = pool.withLock { p -> Int in
      p.stopping = true
      return p.running
    }
    if running > 0 { _ = forsetti_eventfd_ring(stopBell) }
  }

  /// Parks every thread of the pool once the handler it runs has returned, waiting at most
  /// `seconds`: true when all are parked — no worker's frame is being read, no host call is
  /// being answered, and none will be until `resume` (a handover to a new image of the host
  /// must not leave a call half answered). False (the pool resumed) when a handler did not
  /// return in time: a host call blocked in a role call, say.
  package func pause(within seconds: Double) -> Bool {
    guard pauseBell >= 0 else { return false }
    pool.withLock { $0.pausing = true }
    _ = forsetti_eventfd_ring(pauseBell)
    let end = ContinuousClock.now + .wait(seconds)
    while true {
      if pool.withLock({ $0.parked >= $0.running }) { return true }
      if ContinuousClock.now >= end {
        resume()
        return false
      }
      usleep(1000)
    }
  }

  /// Lets the threads `pause` parked go on.
  package func resume() {
    var count: UInt64 = 0
    // Drained first: a thread let go must not find the bell still rung.
    _ = Glibc.read(pauseBell, &count, 8)
    let parked = pool.withLock { p -> Int in
      p.pausing = false
      defer { p.parked = 0 }
      return p.parked
    }
    for _ in 0..<parked { unpark.signal() }
  }

  /// A thread took the pause bell: armed again for the next, then parked until `resume`.
  private func park() {
    _ = forsetti_epoll_rearm(epoll, pauseBell, Self.pauseToken)
    let parks = pool.withLock { p -> Bool in
      guard p.pausing else { return false }
      p.parked += 1
      return true
    }
    if parks { unpark.wait() }
  }

  /// Starts the base threads with the first entry.
  private func startIfIdle() -> Bool {
    let missing = pool.withLock { p -> Int in
      guard !p.stopping, p.running < baseThreads else { return 0 }
      let n = baseThreads - p.running
      p.running += n
      p.peak = max(p.peak, p.running)
      return n
    }
    var ok = true
    for _ in 0..<missing where !spawn() { ok = false }
    return ok || threads.running > 0
  }

  private func spawn() -> Bool {
    let started = DetachedThread.start { [self] in self.serve() }
    if !started { pool.withLock { $0.running -= 1 } }
    return started
  }

  private func serve() {
    let thread = Thread(loop: self)
    while true {
      var token: UInt64 = 0
      let above = pool.withLock { $0.running > baseThreads }
      let n = forsetti_epoll_wait_one(epoll, &token, above ? Self.idleMilliseconds : -1)
      if n < 0 {
        if errno == EINTR { continue }
        return pool.withLock { $0.running -= 1 }
      }
      if n == 0 {
        let ends = pool.withLock { p -> Bool in
          guard p.running > baseThreads else { return false }
          p.running -= 1
          return true
        }
        if ends { return }
        continue
      }
      if token == Self.pauseToken {
        park()
        continue
      }
      if token == 0 {
        // Armed again for the next thread, so every one of them sees it and ends.
        _ = forsetti_epoll_rearm(epoll, stopBell, 0)
        return pool.withLock { $0.running -= 1 }
      }
      guard let entry = entries.withLock({ $0[token] }) else { continue }
      let grow = pool.withLock { p -> Bool in
        p.busy += 1
        guard p.busy >= p.running, p.running < maxThreads, !p.stopping else { return false }
        p.running += 1
        p.peak = max(p.peak, p.running)
        return true
      }
      if grow { _ = spawn() }
      let next = entry.source.ready(thread)
      pool.withLock { $0.busy -= 1 }
      switch next {
      case .again:
        if !entry.edge { rearm(token) }
      case .done:
        remove(token)
      }
    }
  }
}

/// A loop entry whose handler is a closure.
final class LoopHandler: LoopSource {
  private let body: @Sendable (WorkerLoop.Thread) -> WorkerLoop.Next
  init(_ body: @escaping @Sendable (WorkerLoop.Thread) -> WorkerLoop.Next) { self.body = body }
  func ready(_ thread: WorkerLoop.Thread) -> WorkerLoop.Next { body(thread) }
}
