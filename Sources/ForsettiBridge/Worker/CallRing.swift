import CForsettiSys
import Glibc
import Synchronization

/// The synchronous host-call channel of a worker: one request slot and one response slot in
/// memory both processes map (a memfd the host creates and hands the worker as a descriptor),
/// with a sequence word each. The side that waits spins for a bounded time, then sleeps on a
/// futex; the other side wakes it only when it said it was asleep.
///
/// Blocking socket IPC on these machines costs a cross-CPU wake-up per hop (tens of µs); a
/// spinning waiter sees the other side's write in well under a microsecond. The price is a
/// CPU spinning for at most `spin` after each call and while a call is answered.
///
/// The worker is untrusted and may write anything into the mapping at any time. The host
/// copies a request out of shared memory before it reads it (a length is checked once, on the
/// copy), and a worker that scribbles on the words can only make its own calls fail or keep
/// its own host thread busy — or, on a serve ring or a role channel, hold the module calling it
/// until the call's deadline.
package final class CallRing: @unchecked Sendable {
  // @unchecked: the mapping is shared on purpose; every access to the control words goes
  // through the atomic helpers of forsetti_ring.h, and each slot has one writer per call.

  /// The largest request or response, in bytes.
  package static let capacity = Wire.maxFrame
  package static let headerSize = 64
  package static let size = headerSize + 2 * capacity
  /// How long a waiter spins before it sleeps on the futex.
  package static let spinNanoseconds: UInt64 = 50_000

  // Word indices in the header.
  private enum Word: Int {
    case requestSeq = 0, responseSeq, serverAsleep, clientAsleep, requestLength, responseLength, closed
    /// A lane's call (a role channel's, or the serve ring's): its `Gate`, its deadline, when its
    /// handler began, when it was sent (`LaneView`).
    case gate, deadlineLow, deadlineHigh, startedLow, startedHigh, sentLow, sentHigh
  }

  private let base: UnsafeMutableRawPointer
  /// The mapping both rings of a worker live in, unmapped when neither is used any more.
  private let mapping: RingMapping
  /// The second ring of the mapping, which runs the other way: the host calls, the worker
  /// serves (the calls of other modules to the role this worker's module serves). Only the
  /// first ring has one.
  package let serves: CallRing?

  /// The eventfd the worker rings (instead of a futex wake) when the host's server is asleep:
  /// the host serves every worker's ring from a few threads waiting in one epoll set
  /// (`WorkerLoop`), which a futex cannot wake. -1 on every other ring.
  private let doorbell: Int32
  /// A role channel's bell (`ChannelRing`): two words, the count of requests published on any
  /// of its lanes and whether the provider's thread sleeps on it. nil on every other ring.
  private let bell: UnsafeMutablePointer<UInt32>?
  /// The last request answered, on the host's side of a call ring served by `answerPending`.
  private let lastAnswered = Atomic<UInt32>(0)
  /// How long a caller on this ring spins for its answer (`SpinBudget`).
  package let callerSpin = SpinBudget(ceiling: spinNanoseconds)

  init(
    mapping: RingMapping, offset: Int, serves: CallRing?, doorbell: Int32 = -1,
    bell: UnsafeMutablePointer<UInt32>? = nil
  ) {
    self.mapping = mapping
    base = mapping.base + offset
    self.serves = serves
    self.doorbell = doorbell
    self.bell = bell
  }

  /// The whole mapping: the call ring, the serve ring, the worker's progress page, then its
  /// crash record (`forsetti_crash.h`).
  package static let mappingSize = 2 * size + WorkerProgress.size + crashRecordSize

  /// The crash record's room, whole pages.
  package static let crashRecordSize = (MemoryLayout<forsetti_crash_record>.size + 4095) / 4096 * 4096

  /// The worker's crash record, shared by the host and this worker only; nil on every ring but
  /// a worker's call ring. What is in it is the worker's word, read by the host as untrusted.
  package var crashRecord: UnsafeMutablePointer<forsetti_crash_record>? {
    serves == nil
      ? nil
      : (mapping.base + 2 * Self.size + WorkerProgress.size).bindMemory(
        to: forsetti_crash_record.self, capacity: 1)
  }

  /// The worker's progress page (`WorkerProgress`), shared by the host and this worker only;
  /// nil on every ring but a worker's call ring.
  package var progress: WorkerProgress? {
    serves == nil ? nil : WorkerProgress(mapping.base + 2 * Self.size)
  }

  /// A new ring (with its serve ring) and the descriptor to hand the worker (close-on-exec;
  /// dup2 it into place). Its server starts asleep: the worker's first call rings the doorbell.
  package static func create() -> (ring: CallRing, fd: Int32)? {
    let fd = forsetti_memfd("forsetti-calls", UInt64(mappingSize))
    guard fd >= 0 else { return nil }
    guard let ring = map(fd, keeping: fcntl(fd, F_DUPFD_CLOEXEC, 3)) else {
      Glibc.close(fd)
      return nil
    }
    forsetti_store_seq_cst(ring.word(.serverAsleep), 1)
    return (ring, fd)
  }

  /// The host's side of a worker's rings handed over by the image before it (`fd`, the memory
  /// `create` made, now owned by the ring): served from the next request on, the last answer
  /// published being the last one the previous image gave.
  package static func adopt(fd: Int32) -> CallRing? {
    var st = stat()
    guard fstat(fd, &st) == 0, Int(st.st_size) == mappingSize, let ring = map(fd, keeping: fd) else {
      return nil
    }
    ring.lastAnswered.store(forsetti_load_acquire(ring.word(.responseSeq)), ordering: .relaxed)
    return ring
  }

  /// The host's descriptor of the rings' memory (-1: none kept; they cannot be handed over).
  package var descriptor: Int32 { mapping.descriptor }

  /// The worker's side: maps the rings the host passed as `fd`; `doorbell`, the eventfd the
  /// host sent with the configuration, is rung when the host's server sleeps.
  package static func attach(fd: Int32, doorbell: Int32 = -1) -> CallRing? {
    var st = stat()
    guard fstat(fd, &st) == 0, Int(st.st_size) == mappingSize else { return nil }
    return map(fd, doorbell)
  }

  private static func map(_ fd: Int32, _ doorbell: Int32 = -1, keeping kept: Int32 = -1) -> CallRing? {
    let p = mmap(nil, mappingSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
    guard let p, p != MAP_FAILED else {
      if kept >= 0, kept != fd { Glibc.close(kept) }
      return nil
    }
    let mapping = RingMapping(base: p, size: mappingSize, descriptor: kept)
    let serves = CallRing(mapping: mapping, offset: size, serves: nil)
    return CallRing(mapping: mapping, offset: 0, serves: serves, doorbell: doorbell)
  }

  private func word(_ w: Word) -> UnsafeMutablePointer<UInt32> {
    base.assumingMemoryBound(to: UInt32.self) + w.rawValue
  }

  private var requestSlot: UnsafeMutableRawPointer { base + Self.headerSize }
  private var responseSlot: UnsafeMutableRawPointer { base + Self.headerSize + Self.capacity }

  package var isClosed: Bool { forsetti_load_acquire(word(.closed)) != 0 }

  /// Waits until `*w != value` (or the ring closes, or `deadline` — CLOCK_MONOTONIC
  /// nanoseconds — passes): spins, then sleeps with `asleep` raised. Returns the new value.
  private func wait(
    _ w: Word, whileEqualTo value: UInt32, asleep: Word, deadline: UInt64? = nil,
    spin: UInt64 = spinNanoseconds, slept: UnsafeMutablePointer<Bool>? = nil
  ) -> UInt32? {
    let p = word(w)
    let start = Self.nanoseconds()
    var n = 0
    while spin > 0 {
      let v = forsetti_load_acquire(p)
      if v != value { return v }
      if isClosed { return nil }
      n += 1
      guard n & 63 == 0 else {
        forsetti_cpu_relax()
        continue
      }
      let now = Self.nanoseconds()
      if let deadline, now >= deadline { return nil }
      if now &- start > spin { break }
      // Both ends may share one CPU (or lose theirs to another thread): let the other run.
      sched_yield()
    }
    slept?.pointee = true
    let flag = word(asleep)
    defer { forsetti_store_release(flag, 0) }
    while true {
      // Raise the flag, then look again: the other side stores its word, then reads the flag.
      forsetti_store_seq_cst(flag, 1)
      let v = forsetti_load_seq_cst(p)
      if v != value { return v }
      if isClosed { return nil }
      let now = Self.nanoseconds()
      if let deadline, now >= deadline { return nil }
      // Asleep until the deadline, never past it (a caller's 100 ms is 100 ms); a second at
      // most, which guards against a wake that raced the flag: the value check above decides.
      _ = forsetti_futex_wait(p, value, Int64(min(Self.recheck, deadline.map { $0 - now } ?? Self.recheck)))
    }
  }

  /// The longest a sleeper sleeps before it looks at its word again without being woken.
  package static let recheck: UInt64 = 1_000_000_000

  package static func nanoseconds() -> UInt64 {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return UInt64(t.tv_sec) &* 1_000_000_000 &+ UInt64(t.tv_nsec)
  }

  private func publish(_ w: Word, _ value: UInt32, wakeIf asleep: Word) {
    forsetti_store_seq_cst(word(w), value)
    if w == .requestSeq, let bell {
      // A lane: the provider's thread sleeps on the channel's bell, not on this word.
      _ = forsetti_fetch_add(bell, 1)
      if forsetti_load_seq_cst(bell + 1) != 0 { _ = forsetti_futex_wake(bell, 1) }
      return
    }
    guard forsetti_load_seq_cst(word(asleep)) != 0 else { return }
    if w == .requestSeq, doorbell >= 0 {
      _ = forsetti_eventfd_ring(doorbell)
    } else {
      _ = forsetti_futex_wake(word(w), 1)
    }
  }

  // MARK: calling side (the worker on its call ring, the host on a serve ring)

  /// Sends `request` and waits for the response, copied into `response`; its length (0 for a
  /// response that does not fit), or nil when the ring closed (or the deadline passed). One
  /// caller at a time.
  package func call(_ request: UnsafeRawBufferPointer, response: UnsafeMutableRawBufferPointer) -> Int? {
    call(
      encoding: { slot in
        guard request.count <= slot.count, let src = request.baseAddress, let dst = slot.baseAddress else {
          return nil
        }
        dst.copyMemory(from: src, byteCount: request.count)
        return request.count
      }, response: response)
  }

  /// As `call`, with the request written by `encode` straight into the ring's request slot
  /// (returning its length, or nil if it does not fit), so nothing is built and copied first.
  /// With a `deadline` (CLOCK_MONOTONIC nanoseconds) the wait for the answer ends there: the
  /// host calling into a worker must not wait on it for ever. A late answer is then ignored: the
  /// next call waits for the sequence number of its own request. The caller spins for the
  /// answer as long as `callerSpin` says, then sleeps.
  package func call(
    encoding encode: (UnsafeMutableRawBufferPointer) -> Int?, response: UnsafeMutableRawBufferPointer,
    deadline: UInt64? = nil
  ) -> Int? {
    guard let length = encode(UnsafeMutableRawBufferPointer(start: requestSlot, count: Self.capacity)),
      length <= Self.capacity
    else { return nil }
    forsetti_store_release(word(.requestLength), UInt32(length))
    let seq = forsetti_load_acquire(word(.requestSeq)) &+ 1
    publish(.requestSeq, seq, wakeIf: .serverAsleep)
    return awaitAnswer(seq, response: response, until: deadline)
  }

  // MARK: serving side (the host on a call ring, the worker on its serve ring)

  /// Answers requests with `handle` until `close()`. The request `handle` sees is a private
  /// copy; it writes the response into the buffer it is given (the ring's response slot) and
  /// returns its length.
  package func serve(_ handle: (UnsafeRawBufferPointer, UnsafeMutableRawBufferPointer) -> Int) {
    let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.capacity, alignment: 8)
    defer { copy.deallocate() }
    // A fresh ring starts at 0; the worker's first call may come before this thread runs.
    var seen: UInt32 = 0
    while let seq = wait(.requestSeq, whileEqualTo: seen, asleep: .serverAsleep) {
      seen = seq
      answer(seq, copy: copy, handle)
    }
  }

  /// Answers request `seq`: read once, checked once, then only the private `copy` is used.
  private func answer(
    _ seq: UInt32, copy: UnsafeMutableRawBufferPointer,
    _ handle: (UnsafeRawBufferPointer, UnsafeMutableRawBufferPointer) -> Int
  ) {
    let n = Int(forsetti_load_acquire(word(.requestLength)))
    var length = 0
    if n <= Self.capacity, n <= copy.count, let dst = copy.baseAddress {
      dst.copyMemory(from: requestSlot, byteCount: n)
      let slot = UnsafeMutableRawBufferPointer(start: responseSlot, count: Self.capacity)
      length = min(max(0, handle(UnsafeRawBufferPointer(rebasing: copy[0..<n]), slot)), Self.capacity)
    }
    forsetti_store_release(word(.responseLength), UInt32(length))
    publish(.responseSeq, seq, wakeIf: .clientAsleep)
  }

  // MARK: a lane: one call at a time, its progress in words both ends and the host read

  /// Sends a request on a lane (the caller: a consumer on a channel, or the host on a serve
  /// ring), marking it queued with its `deadline`: its sequence number, or nil when it does not
  /// fit. The answer is then awaited with `awaitAnswer`, so the caller can look at the call
  /// (and withdraw it) while it waits.
  package func send(encoding encode: (UnsafeMutableRawBufferPointer) -> Int?, deadline: UInt64) -> UInt32? {
    guard let length = encode(UnsafeMutableRawBufferPointer(start: requestSlot, count: Self.capacity)),
      length <= Self.capacity
    else { return nil }
    let seq = forsetti_load_acquire(word(.requestSeq)) &+ 1
    forsetti_store_release(word(.requestLength), UInt32(length))
    store64(.deadlineLow, deadline)
    store64(.sentLow, Self.nanoseconds())
    forsetti_store_seq_cst(word(.gate), Gate.queued.word(seq))
    publish(.requestSeq, seq, wakeIf: .serverAsleep)
    return seq
  }

  /// Waits for the answer to request `seq` until `deadline` (none: as long as the ring is
  /// open): its length, copied into `response` (0 for one that does not fit), or nil when the
  /// deadline passed or the ring closed. The caller spins for it as long as `callerSpin` says,
  /// then sleeps.
  package func awaitAnswer(_ seq: UInt32, response: UnsafeMutableRawBufferPointer, until deadline: UInt64?)
    -> Int?
  {
    var answered = forsetti_load_acquire(word(.responseSeq))
    var slept = false
    let spin = callerSpin.next
    while answered != seq {
      // Checked on every pass: a peer that keeps changing the word (to anything but the answer)
      // must not hold the caller past its deadline.
      if let deadline, Self.nanoseconds() >= deadline { return nil }
      guard
        let v = wait(
          .responseSeq, whileEqualTo: answered, asleep: .clientAsleep, deadline: deadline, spin: spin,
          slept: &slept)
      else { return nil }
      answered = v
    }
    callerSpin.record(answeredWhileSpinning: !slept && spin > 0)
    let n = Int(forsetti_load_acquire(word(.responseLength)))
    // An answer claiming more than fits is no answer: read as empty, which no reader accepts
    // (nil would name it a timeout or a closed ring).
    guard n <= response.count, n <= Self.capacity, let dst = response.baseAddress else { return 0 }
    dst.copyMemory(from: responseSlot, byteCount: n)
    return n
  }

  /// Whether request `seq` has been answered.
  package func isAnswered(_ seq: UInt32) -> Bool { forsetti_load_acquire(word(.responseSeq)) == seq }

  /// Withdraws request `seq` if no handler has begun it (its caller timed out, or the host
  /// refused it as a cycle): true when withdrawn. The provider then answers it without running it.
  package func withdraw(_ seq: UInt32) -> Bool {
    forsetti_cas(word(.gate), Gate.queued.word(seq), Gate.withdrawn.word(seq)) != 0
  }

  /// The provider's side: request `seq`, withdrawn or past `deadline` before a handler began
  /// it, is retired (once) so it is answered without running: true for the one thread that
  /// retired it, which answers it.
  package func retire(_ seq: UInt32, now: UInt64) -> Bool {
    if load64(.deadlineLow) <= now {
      _ = withdraw(seq)
    } else if forsetti_load_acquire(word(.gate)) != Gate.withdrawn.word(seq) {
      // The common case, looked at without a locked instruction: nothing to retire.
      return false
    }
    return forsetti_cas(word(.gate), Gate.withdrawn.word(seq), Gate.retired.word(seq)) != 0
  }

  /// Whether request `seq` still waits for a handler, before its deadline (the provider's
  /// side; the words are the caller's claim about its own call).
  package func isLive(_ seq: UInt32, now: UInt64) -> Bool {
    forsetti_load_seq_cst(word(.gate)) == Gate.queued.word(seq) && load64(.deadlineLow) > now
      && forsetti_load_acquire(word(.requestSeq)) == seq
  }

  /// The deadline of the newest request (the caller's claim; for choosing among its calls).
  package var queuedDeadline: UInt64 { load64(.deadlineLow) }

  /// When the caller sent its newest request (its claim; for the provider's queue-wait counts).
  package var sentAt: UInt64 { load64(.sentLow) }

  /// The newest request published on the lane (the provider's side).
  package var requestSequence: UInt32 { forsetti_load_acquire(word(.requestSeq)) }

  /// Copies request `seq` out of the lane into `copy` (the provider's side): its length, or nil
  /// when a newer request replaced it or its length is not one. Read once, checked once.
  package func copyRequest(_ seq: UInt32, into copy: UnsafeMutableRawBufferPointer) -> Int? {
    let n = Int(forsetti_load_acquire(word(.requestLength)))
    guard n <= Self.capacity, n <= copy.count, let dst = copy.baseAddress else { return nil }
    dst.copyMemory(from: requestSlot, byteCount: n)
    guard forsetti_load_acquire(word(.requestSeq)) == seq else { return nil }
    return n
  }

  /// A handler takes request `seq` from queued to running (the provider's side): false when it
  /// was withdrawn (or replaced) first. Only then is anything of the lane written, so a lane
  /// its caller has moved on from is never touched.
  package func begin(_ seq: UInt32) -> Bool {
    guard forsetti_cas(word(.gate), Gate.queued.word(seq), Gate.running.word(seq)) != 0 else { return false }
    store64(.startedLow, Self.nanoseconds())
    return true
  }

  /// The response slot a handler writes request `seq`'s answer into, then `respond`s.
  package var responseBuffer: UnsafeMutableRawBufferPointer {
    UnsafeMutableRawBufferPointer(start: responseSlot, count: Self.capacity)
  }

  /// Publishes the answer to request `seq`, `length` bytes already in `responseBuffer`.
  package func respond(_ seq: UInt32, length: Int) {
    forsetti_store_release(word(.responseLength), UInt32(min(max(0, length), Self.capacity)))
    publish(.responseSeq, seq, wakeIf: .clientAsleep)
  }

  /// Where a lane's call is, as the host reads it: every word is the workers' to write, so this
  /// is what they claim (a lie changes only how the liar's own calls are judged).
  package struct LaneView: Sendable {
    package var seq: UInt32
    /// A request not yet answered.
    package var outstanding: Bool
    package var gate: Gate?
    package var deadline: UInt64
    package var started: UInt64
    package var sent: UInt64

    package var isRunning: Bool { outstanding && gate == .running }
    package var isQueued: Bool { outstanding && gate == .queued }
  }

  /// The lane's call as its words say now.
  package var view: LaneView {
    let seq = forsetti_load_seq_cst(word(.requestSeq))
    let gate = forsetti_load_seq_cst(word(.gate))
    let current = gate & ~3 == Gate.queued.word(seq) & ~3
    return LaneView(
      seq: seq, outstanding: forsetti_load_acquire(word(.responseSeq)) != seq && !isClosed,
      gate: current ? Gate(rawValue: gate & 3) : nil, deadline: load64(.deadlineLow),
      started: load64(.startedLow), sent: load64(.sentLow))
  }

  /// The state of a lane's call beside its sequence number (the low 30 bits of it).
  package enum Gate: UInt32, Sendable {
    /// `retired`: a withdrawn call the provider has answered (without running it).
    case retired = 0, queued = 1, running = 2, withdrawn = 3
    func word(_ seq: UInt32) -> UInt32 { (seq << 2) | rawValue }
  }

  /// The method of the request on the lane (for the host's log), if the slot holds a call.
  package var requestMethod: String? {
    let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.capacity, alignment: 8)
    defer { copy.deallocate() }
    guard let n = copyRequest(requestSequence, into: copy),
      let f = try? WireView(UnsafeRawBufferPointer(rebasing: copy[0..<n])), let call = RoleCall.Frame(f)
    else { return nil }
    return Wire.text(call.method)
  }

  private func store64(_ low: Word, _ v: UInt64) {
    let p = base.assumingMemoryBound(to: UInt32.self) + low.rawValue
    forsetti_store_release(p, UInt32(truncatingIfNeeded: v))
    forsetti_store_release(p + 1, UInt32(truncatingIfNeeded: v >> 32))
  }

  private func load64(_ low: Word) -> UInt64 {
    let p = base.assumingMemoryBound(to: UInt32.self) + low.rawValue
    return UInt64(forsetti_load_acquire(p)) | UInt64(forsetti_load_acquire(p + 1)) << 32
  }

  /// Waits (spins, then sleeps) until a request newer than `seen` is published: its sequence
  /// number, or nil when the ring closed. For a server that hands requests on (the serve ring).
  package func awaitRequest(after seen: UInt32) -> UInt32? {
    wait(.requestSeq, whileEqualTo: seen, asleep: .serverAsleep)
  }

  // MARK: serving from the host's loop (`WorkerLoop`): one thread at a time per ring

  /// Answers the waiting request, if one is: true when it did. `copy` is the thread's scratch.
  package func answerPending(
    copy: UnsafeMutableRawBufferPointer,
    _ handle: (UnsafeRawBufferPointer, UnsafeMutableRawBufferPointer) -> Int
  ) -> Bool {
    let seq = forsetti_load_acquire(word(.requestSeq))
    guard seq != lastAnswered.load(ordering: .relaxed), !isClosed else { return false }
    lastAnswered.store(seq, ordering: .relaxed)
    answer(seq, copy: copy, handle)
    return true
  }

  /// The sequence number of the last answer published, as the ends wrote it (it wraps at 2^32):
  /// read for the provider's role calls on a channel (`ModuleCounters`), never believed further.
  package var answeredSequence: UInt32 { forsetti_load_acquire(word(.responseSeq)) }

  /// Whether a request waits to be answered.
  package var hasPending: Bool {
    forsetti_load_acquire(word(.requestSeq)) != lastAnswered.load(ordering: .relaxed) && !isClosed
  }

  /// Spins up to `spin` nanoseconds for the worker's next request, while `keepGoing` holds;
  /// true when one came. The same spin as a caller's wait, for a server that is not a thread of
  /// its own.
  package func spinForRequest(_ spin: UInt64, while keepGoing: () -> Bool) -> Bool {
    let start = Self.nanoseconds()
    var n = 0
    while !isClosed {
      if hasPending { return true }
      n += 1
      guard n & 63 == 0 else {
        forsetti_cpu_relax()
        continue
      }
      guard Self.nanoseconds() &- start < spin, keepGoing() else { return false }
      sched_yield()
    }
    return false
  }

  /// The server is awake (serving or spinning): the worker need not ring.
  package func serverAwake() { forsetti_store_release(word(.serverAsleep), 0) }

  /// The server goes to sleep: raises the flag, then looks again (the worker stores its word,
  /// then reads the flag). True when asleep; false when a request came meanwhile (serve it).
  package func serverSleeps() -> Bool {
    forsetti_store_seq_cst(word(.serverAsleep), 1)
    return forsetti_load_seq_cst(word(.requestSeq)) == lastAnswered.load(ordering: .relaxed) || isClosed
  }

  /// Ends `serve` (and any waiting `call`), on this ring and its serve ring: the worker is gone.
  package func close() {
    serves?.close()
    forsetti_store_seq_cst(word(.closed), 1)
    _ = forsetti_futex_wake(word(.requestSeq), Int32.max)
    _ = forsetti_futex_wake(word(.responseSeq), Int32.max)
  }
}

/// One mapping of a worker's two rings (or a channel's lanes), unmapped with the last ring that
/// uses it.
final class RingMapping: Sendable {
  // The pointer is only read; the memory behind it is the rings' business.
  nonisolated(unsafe) let base: UnsafeMutableRawPointer
  let size: Int
  /// The host's own descriptor of the memory (close-on-exec), kept so the rings can be handed
  /// to a new image of the host (`forsetti-host upgrade`: a mapping does not survive `execve`,
  /// a descriptor does); -1 on a worker's side, or when none could be kept.
  let descriptor: Int32
  init(base: UnsafeMutableRawPointer, size: Int, descriptor: Int32 = -1) {
    self.base = base
    self.size = size
    self.descriptor = descriptor
  }
  deinit {
    munmap(base, size)
    if descriptor >= 0 { close(descriptor) }
  }
}
