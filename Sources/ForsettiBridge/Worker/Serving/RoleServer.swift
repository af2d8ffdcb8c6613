import CForsetti
import Dispatch
import ForsettiCore
import Glibc
import Synchronization

/// The provider's side of a role in its worker: one thread per source of calls (the host's
/// serve ring; each consumer's channel, watching its lanes) hands each call it finds to a
/// `FairQueue`, and `concurrency` handler threads take them in turn across consumers. A handler
/// thread copies the request out of its lane, answers at once a call whose deadline passed while
/// it waited (FORSETTI_ERR_TIMEOUT, not run) or that its caller or the host withdrew, marks the
/// call begun (the host judges progress and cycles by these words), runs the handler with the
/// call's path and deadline as its thread's, and answers on the lane.
package final class RoleServer: Sendable {
  /// One call found on a lane.
  private struct Item: Sendable {
    let lane: CallRing
    let seq: UInt32
    /// The consumer the host labelled the channel with; nil on the serve ring (the frame names
    /// the caller: the host's binding).
    let label: String?
    /// The channel, for its queue-wait counts; nil on the serve ring.
    let channel: ChannelRing?
  }

  private struct State: Sendable {
    var queue = FairQueue<Item>()
    var handler: ModuleCallback<forsetti_role_handler>?
    var threads = 0
    /// The handler slots (`WorkerProgress` slots) no call holds: the declared concurrency, less
    /// the calls running.
    var freeSlots: [Int] = []
    var running = 0
    /// How long the handler takes, lately (an average weighted to the last calls, ns): a queued
    /// call with less time left than this is run only when its caller has none with more.
    var handlerTime: UInt64 = 0
    var servingRing = false
    /// The threads watching channels, and which watches each consumer's.
    var watchers: [Watcher] = []
    var labels: [String: Int] = [:]
  }

  private struct Watcher: Sendable {
    let watcher: ChannelWatcher
    /// The consumers it watches (Int.max: its thread could not start; it takes no more).
    var labels: Int
  }

  private let state = SleepingLock(State())
  private let ready = DispatchSemaphore(value: 0)
  /// The index of the role served (`DefaultModuleRole.allCases`), for the handler's path.
  private let role: Int
  /// Where each handler thread says which call it is in, for the host only (`WorkerProgress`).
  private let progress: WorkerProgress?

  package init(role: Int, progress: WorkerProgress?) {
    self.role = role
    self.progress = progress
  }

  /// Installs `handler`, run by `concurrency` threads at once (more are started, never fewer:
  /// a handler declared for more threads later gets them).
  package func serve(_ handler: ModuleCallback<forsetti_role_handler>, concurrency: Int) {
    let more = state.withLock { s -> Int in
      s.handler = handler
      let first = s.threads
      s.threads = max(s.threads, min(concurrency, WorkerProgress.slots))
      s.freeSlots.append(contentsOf: first..<s.threads)
      return s.threads - first
    }
    for _ in 0..<more { _ = DetachedThread.start { [self] in handlerLoop() } }
  }

  /// Takes the handler away and waits for the calls running in it (at most `limit` seconds):
  /// no handler runs during or after the module's `stop`.
  func withdraw(limit: Double = 5) {
    state.withLock { $0.handler = nil }
    let end = CallRing.nanoseconds() &+ UInt64(limit * 1e9)
    while state.withLock({ $0.running }) > 0, CallRing.nanoseconds() < end { usleep(1000) }
  }

  /// Serves the host's serve ring (calls from modules in the host's process or the
  /// application), once.
  func serveRing(_ ring: CallRing) {
    let first = state.withLock { s -> Bool in
      defer { s.servingRing = true }
      return !s.servingRing
    }
    guard first else { return }
    _ = DetachedThread.start { [self] in
      let scratch = HandlerScratch()
      var seen: UInt32 = 0
      while let seq = ring.awaitRequest(after: seen) {
        seen = seq
        // Queued as the caller the host's frame names: a module calling both through the host
        // and on its own channel has one queue, so one turn a round, not one per path.
        enqueue(
          Item(lane: ring, seq: seq, label: nil, channel: nil), caller: caller(ring, seq, scratch), scratch)
      }
    }
  }

  /// Serves a consumer's channel the host sent, labelled with that consumer, until it closes
  /// or the host sends that consumer another. Channels are watched by `ChannelWatcher` threads,
  /// `ChannelWatcher.capacity` channels each, a consumer always by the same one; a worker at its
  /// task limit (128 by default) that cannot start another closes the channel at once (its
  /// consumer's call is then UNAVAILABLE) rather than leave it with nobody to answer it.
  package func serveChannel(_ channel: ChannelRing, label: String) {
    let (watcher, fresh) = state.withLock { s -> (ChannelWatcher, Bool) in
      if let i = s.labels[label] { return (s.watchers[i].watcher, false) }
      // Labels are the consumer modules the host names, so these never grow past the modules.
      if let i = s.watchers.firstIndex(where: { $0.labels < ChannelWatcher.capacity }) {
        s.watchers[i].labels += 1
        s.labels[label] = i
        return (s.watchers[i].watcher, false)
      }
      let w = ChannelWatcher()
      s.labels[label] = s.watchers.count
      s.watchers.append(Watcher(watcher: w, labels: 1))
      return (w, true)
    }
    watcher.send(channel, label: label)
    guard fresh else { return }
    if !DetachedThread.start({ [self] in watch(watcher) }) {
      state.withLock { s in
        guard let i = s.watchers.firstIndex(where: { $0.watcher === watcher }) else { return }
        // Takes no more consumers, and this one's next channel tries a watcher again.
        s.watchers[i].labels = Int.max
        s.labels = s.labels.filter { $0.value != i }
      }
      channel.close()
    }
  }

  /// A watcher's thread: hands each call it finds to `enqueue`, answers each withdrawn one.
  private func watch(_ watcher: ChannelWatcher) {
    let scratch = HandlerScratch()
    var watch = ChannelWatcher.Watch(watcher)
    var batch = ChannelWatcher.Batch()
    while true {
      watch.next(into: &batch)
      for w in batch.withdrawn {
        retired(Item(lane: w.lane, seq: w.seq, label: w.label, channel: w.channel), scratch)
      }
      for c in batch.calls {
        enqueue(
          Item(lane: c.lane, seq: c.seq, label: c.label, channel: c.channel), caller: c.label, scratch,
          mayRunHere: batch.alone)
      }
      batch.calls.removeAll(keepingCapacity: true)
      batch.withdrawn.removeAll(keepingCapacity: true)
    }
  }

  /// The caller a serve-ring call's frame names ("" when it names none or is not a call: it is
  /// answered as such by the handler thread).
  private func caller(_ ring: CallRing, _ seq: UInt32, _ scratch: HandlerScratch) -> String {
    guard let n = ring.copyRequest(seq, into: scratch.request),
      let f = try? WireView(UnsafeRawBufferPointer(rebasing: scratch.request[0..<n])),
      let call = RoleCall.Frame(f)
    else { return "" }
    return String(decoding: call.caller, as: UTF8.self)
  }

  /// Hands a call found on a lane on: queued in turn with the other consumers' calls for a
  /// handler thread; or, for a provider of concurrency 1 with nothing waiting, run at once on
  /// the finding thread (the idle provider's path: no hand-off, as fast as one thread answers).
  /// Only then, and only for a watcher of one channel (`mayRunHere`): while the finding thread
  /// runs a call it sees no other call on what it watches, which a provider of more handlers
  /// would run meanwhile and another consumer's withdrawn call would wait for.
  private func enqueue(_ item: Item, caller: String, _ scratch: HandlerScratch, mayRunHere: Bool = true) {
    var wake = false
    let slot = state.withLock { s -> Int? in
      if mayRunHere, s.threads == 1, s.queue.count == 0, let slot = s.freeSlots.popLast() {
        // Through the queue all the same (it is empty: the call comes straight back), so the
        // rounds count this call as its caller's turn: a flood run here would otherwise have
        // its next call queued in the round it was already served in.
        _ = s.queue.push(caller, item, limit: 1)
        _ = s.queue.pop()
        return slot
      }
      // A consumer has no more calls outstanding than its lanes; more is a scribbler's, dropped.
      wake = s.queue.push(caller, item, limit: ChannelRing.maxLanes) && !s.freeSlots.isEmpty
      return nil
    }
    if let slot {
      answer(item, scratch, slot: slot)
      finished(slot)
    } else if wake {
      ready.signal()
    }
  }

  /// Gives a handler slot back, and wakes a handler thread for it when calls wait.
  private func finished(_ slot: Int) {
    let wake = state.withLock { s -> Bool in
      s.freeSlots.append(slot)
      return s.queue.count > 0
    }
    if wake { ready.signal() }
  }

  /// A handler thread: takes the next call in turn whenever a slot is free for it. There are
  /// as many as the declared concurrency, for when calls queue.
  private func handlerLoop() {
    let scratch = HandlerScratch()
    while true {
      ready.wait()
      var dead: [Item] = []
      let now = CallRing.nanoseconds()
      let next = state.withLock { s -> (Item, Int)? in
        guard let slot = s.freeSlots.popLast() else { return nil }
        let needed = s.handlerTime
        let longest = now &+ RoleCall.timeoutNanoseconds
        guard
          let item = s.queue.pop(
            live: { $0.lane.isLive($0.seq, now: now) }, dead: &dead,
            preferring: { min($0.lane.queuedDeadline, longest) &- now >= needed })
        else {
          s.freeSlots.append(slot)
          return nil
        }
        return (item, slot)
      }
      for d in dead where d.lane.retire(d.seq, now: now) { retired(d, scratch) }
      if let (item, slot) = next {
        answer(item, scratch, slot: slot)
        finished(slot)
      }
    }
  }

  /// Answers one call: see the type's comment.
  private func answer(_ item: Item, _ scratch: HandlerScratch, slot: Int) {
    let lane = item.lane
    let now = CallRing.nanoseconds()
    // Claimed first: only the thread that takes a call from queued answers it, so a call is
    // answered once and a lane its caller has moved on from is never written. One withdrawn
    // meanwhile (its caller stopped waiting) is answered, not run, by whoever retires it.
    guard lane.begin(item.seq) else {
      if lane.retire(item.seq, now: now) { retired(item, scratch) }
      return
    }
    let out = lane.responseBuffer
    guard let n = lane.copyRequest(item.seq, into: scratch.request),
      let f = try? WireView(UnsafeRawBufferPointer(rebasing: scratch.request[0..<n]))
    else {
      return respond(lane, item.seq, id: 0, ServiceReply(FORSETTI_ERR_INVALID_ARGUMENT))
    }
    guard let call = RoleCall.Frame(f) else {
      return respond(lane, item.seq, id: f.id, ServiceReply(FORSETTI_ERR_INVALID_ARGUMENT))
    }
    // The deadline is the consumer's claim: never later than the longest a call may have, so a
    // handler never sees more time left, nor its provider's hung verdict more room, than that.
    let longest = now &+ RoleCall.timeoutNanoseconds
    let deadline = call.path.deadline == 0 ? longest : min(call.path.deadline, longest)
    // Its deadline passed while it waited: not run (nobody would read the answer).
    guard now < deadline else { return respond(lane, item.seq, id: f.id, ServiceReply(FORSETTI_ERR_TIMEOUT)) }
    let sent = lane.sentAt
    item.channel?.countWait(now > sent ? now - sent : 0)
    guard
      let h = state.withLock({ s -> ModuleCallback<forsetti_role_handler>? in
        if s.handler != nil { s.running += 1 }
        return s.handler
      })
    else { return respond(lane, item.seq, id: f.id, ServiceReply(FORSETTI_ERR_UNAVAILABLE)) }
    progress?.begin(slot, started: now, deadline: deadline)
    var took: UInt64?
    defer {
      progress?.end(slot)
      state.withLock { s in
        s.running -= 1
        if let took { s.handlerTime = s.handlerTime == 0 ? took : (s.handlerTime / 8) &* 7 &+ took / 8 }
      }
    }
    guard let methodC = scratch.text(call.method), let callerC = scratch.caller(item.label, call.caller)
    else {
      return respond(lane, item.seq, id: f.id, ServiceReply(FORSETTI_ERR_INVALID_ARGUMENT))
    }
    let room = UnsafeMutableRawBufferPointer(rebasing: scratch.response[0..<call.capacity])
    let (status, length) = RoleCall.run(
      h, caller: callerC, method: methodC, request: call.request, into: room,
      path: RolePath(roles: call.path.roles, deadline: deadline).adding(role))
    took = CallRing.nanoseconds() &- now
    var w = WireWriter(into: out, kind: .response, id: f.id)
    w.int(Int64(status))
    w.int(Int64(length))
    w.bytes(
      status == FORSETTI_ERR_BUFFER_TOO_SMALL
        ? UnsafeRawBufferPointer(start: nil, count: 0) : UnsafeRawBufferPointer(rebasing: room[0..<length]))
    lane.respond(item.seq, length: w.length ?? 0)
  }

  /// Answers a call retired before a handler began it, with the call's own id: its caller may
  /// still be waiting (a deadline passing on both sides at once, the host's withdrawal racing
  /// its look), and takes an answer of another id for no answer (FORSETTI_ERR_IO). The request
  /// is still on the lane: its caller sends no other before this answer.
  private func retired(_ item: Item, _ scratch: HandlerScratch) {
    let id = item.lane.copyRequest(item.seq, into: scratch.request).flatMap {
      try? WireView(UnsafeRawBufferPointer(rebasing: scratch.request[0..<$0])).id
    }
    var w = WireWriter(into: item.lane.responseBuffer, kind: .response, id: id ?? 0)
    ServiceReply(FORSETTI_ERR_TIMEOUT).write(&w)
    item.lane.respond(item.seq, length: w.length ?? 0)
  }

  private func respond(_ lane: CallRing, _ seq: UInt32, id: UInt64, _ reply: ServiceReply) {
    var w = WireWriter(into: lane.responseBuffer, kind: .response, id: id)
    reply.write(&w)
    lane.respond(seq, length: w.length ?? 0)
  }
}

/// Memory one handler thread runs calls in: the request's copy, the method and caller as C
/// strings, the response. Allocated once per thread.
private final class HandlerScratch {
  let request = UnsafeMutableRawBufferPointer.allocate(byteCount: CallRing.capacity, alignment: 8)
  let response = UnsafeMutableRawBufferPointer.allocate(byteCount: RoleCall.maxPayload, alignment: 8)
  private let method = UnsafeMutableRawBufferPointer.allocate(
    byteCount: HostFunctions.maxName + 1, alignment: 1)
  private let named = UnsafeMutableRawBufferPointer.allocate(
    byteCount: HostFunctions.maxName + 1, alignment: 1)
  /// The last channel label, kept as a C string of its own.
  private var label: (String, UnsafeMutablePointer<CChar>)?

  /// `bytes` (no NUL inside, at most maxName) as a C string in the method buffer.
  func text(_ bytes: UnsafeRawBufferPointer) -> UnsafePointer<CChar>? { copy(bytes, into: method) }

  /// The caller the channel is labelled with, else the one the host's frame names.
  func caller(_ label: String?, _ named: UnsafeRawBufferPointer) -> UnsafePointer<CChar>? {
    guard let label else { return copy(named, into: self.named) }
    if let kept = self.label, kept.0 == label { return UnsafePointer(kept.1) }
    guard let c = strdup(label) else { return nil }
    if let old = self.label { free(old.1) }
    self.label = (label, c)
    return UnsafePointer(c)
  }

  private func copy(_ bytes: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer)
    -> UnsafePointer<CChar>?
  {
    guard bytes.count < buffer.count, !bytes.contains(0), let base = buffer.baseAddress else { return nil }
    if let src = bytes.baseAddress { base.copyMemory(from: src, byteCount: bytes.count) }
    buffer[bytes.count] = 0
    return UnsafePointer(base.assumingMemoryBound(to: CChar.self))
  }

  deinit {
    request.deallocate()
    response.deallocate()
    method.deallocate()
    named.deallocate()
    if let label { free(label.1) }
  }
}
