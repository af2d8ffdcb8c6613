import CForsetti
import ForsettiCore
import Glibc
import Synchronization

/// A consumer's end of a role channel (`ChannelRing`): its calls of one provider's worker, one
/// lane each. A call finding every lane taken is answered FORSETTI_ERR_BUSY at once: the
/// consumer has the provider's concurrency plus FORSETTI_ROLE_QUEUE_DEPTH calls outstanding
/// already. A call left queued for a moment is shown to the host (`awaitingTurn`), which refuses
/// it as a cycle when the provider waits, through providers as busy, on this module.
final class RoleChannel: Sendable {
  private let ring: ChannelRing
  /// Per lane: taken by a calling thread, or holding a call nobody waits for any more (its
  /// sequence number) until the provider answers it.
  private let use: SleepingLock<[LaneUse]>
  private let nextID = Atomic<UInt64>(0)
  /// The consumer's copy of each lane's answer, used only by the thread that took the lane.
  private let buffers: [AnswerBuffer]
  /// How long a call waits for a handler to begin it before the host is shown it queued.
  static let queuedLook: UInt64 = 2_000_000

  private struct LaneUse: Sendable {
    var taken = false
    var late: UInt32?
  }

  /// The role's index, and this worker's own page, where the host reads which roles its
  /// threads wait on (a cycle's edges; no other worker can write it).
  private let role: Int
  private let progress: WorkerProgress?

  init(_ ring: ChannelRing, role: Int, progress: WorkerProgress?) {
    self.ring = ring
    self.role = role
    self.progress = progress
    use = SleepingLock(Array(repeating: LaneUse(), count: ring.lanes.count))
    buffers = ring.lanes.map { _ in AnswerBuffer() }
  }

  var isClosed: Bool { ring.isClosed }

  /// How a call on the channel ended.
  enum Outcome {
    /// The provider's status (FORSETTI_ERR_IO for an answer that is not one), or the status the
    /// call got before reaching it: BUSY, CALL_CYCLE, TIMEOUT while queued.
    case answered(Int32)
    /// Not answered by the call's deadline.
    case timedOut
    /// The channel is closed: the call was not made, or was cut off (the host decides again).
    case closed
  }

  /// Takes a free lane: one no thread uses and with no unanswered call of the past.
  private func takeLane() -> Int? {
    use.withLock { lanes -> Int? in
      for i in lanes.indices where !lanes[i].taken {
        if let late = lanes[i].late {
          guard ring.lanes[i].isAnswered(late) else { continue }
          lanes[i].late = nil
        }
        lanes[i].taken = true
        return i
      }
      return nil
    }
  }

  /// Calls the provider with the caller's own buffers, passing on `path` (the roles on the
  /// call's path and its deadline). `awaitingTurn(lane)` asks the host about a call still
  /// queued (FORSETTI_ERR_CALL_CYCLE: the host withdrew it).
  func call(
    method: String, request: UnsafeRawBufferPointer, response: UnsafeMutableRawPointer?, capacity: Int,
    length: UnsafeMutablePointer<Int>, path: RolePath, awaitingTurn: (Int) -> Int32
  ) -> Outcome {
    guard !ring.isClosed else { return .closed }
    // Its time went before it was sent: not sent, and not the provider's fault.
    guard CallRing.nanoseconds() < path.deadline else { return .answered(FORSETTI_ERR_TIMEOUT) }
    guard let i = takeLane() else {
      ring.countBusy()
      // The rest of the thread's time slice goes to whoever can run: a consumer retrying BUSY at
      // once would otherwise keep the CPUs from the provider answering the calls that make it
      // busy and from every other module's threads (on two CPUs, 16 such threads did).
      sched_yield()
      return .answered(FORSETTI_ERR_BUSY)
    }
    let lane = ring.lanes[i]
    progress?.waiting(on: role, 1)
    defer { progress?.waiting(on: role, -1) }
    let id = nextID.add(1, ordering: .relaxed).newValue
    guard
      let seq = lane.send(
        encoding: { slot in
          var w = WireWriter(into: slot, kind: .serveCall, id: id)
          // No caller: the provider's end of a channel is labelled with it by the host.
          RoleCall.write(&w, capacity: capacity, caller: "", method: method, request: request, path: path)
          return w.length
        }, deadline: path.deadline)
    else {
      release(i, unanswered: nil)
      return .answered(FORSETTI_ERR_TOO_LARGE)
    }
    let buffer = buffers[i].bytes
    var n = lane.awaitAnswer(
      seq, response: buffer, until: min(path.deadline, CallRing.nanoseconds() &+ Self.queuedLook))
    // The host answers CALL_CYCLE only once it withdrew the call itself (the provider may have
    // retired and answered it already): the call never runs.
    if n == nil, !lane.isClosed, lane.view.isQueued, awaitingTurn(i) == FORSETTI_ERR_CALL_CYCLE {
      ring.ringBell()
      release(i, unanswered: seq)
      return .answered(FORSETTI_ERR_CALL_CYCLE)
    }
    if n == nil { n = lane.awaitAnswer(seq, response: buffer, until: path.deadline) }
    guard let n else {
      if lane.isClosed {
        release(i, unanswered: nil)
        return .closed
      }
      // Not begun yet: withdrawn, and the provider told, so it answers it without running it
      // and the lane is free again.
      if lane.withdraw(seq) { ring.ringBell() }
      ring.countTimedOut()
      release(i, unanswered: seq)
      return .timedOut
    }
    // The lane's buffer is read before the lane is given up: the next call on it overwrites it.
    defer { release(i, unanswered: nil) }
    guard let f = try? WireView(UnsafeRawBufferPointer(rebasing: buffer[0..<n])), f.id == id,
      let (status, count, bytes) = ServiceReply.check(f, capacity: capacity)
    else { return .answered(FORSETTI_ERR_IO) }
    if status == FORSETTI_ERR_TIMEOUT { ring.countTimedOut() }
    if !bytes.isEmpty {
      guard let response, let src = bytes.baseAddress else { return .answered(FORSETTI_ERR_IO) }
      response.copyMemory(from: src, byteCount: bytes.count)
    }
    length.pointee = count
    return .answered(status)
  }

  private func release(_ i: Int, unanswered: UInt32?) {
    use.withLock {
      $0[i].taken = false
      $0[i].late = unanswered
    }
  }
}
