import CForsetti
import ForsettiBridge
import ForsettiCore
import Synchronization

/// The host's side of a provider worker's serve ring: the role calls of modules in the host's
/// process and of the application go to the worker's role handler here, one at a time (the
/// registry's `FairGate` takes them in turn), queued in the worker with its consumers' channels.
/// One that times out before a handler began it is withdrawn (the worker answers it without
/// running it); one that timed out in a handler makes the host look at the provider's progress
/// (`RoleChannels.suspect`).
final class ServeRingCaller: Sendable {
  private let moduleID: String
  private let roleChannels: RoleChannels
  private let counters: ModuleCounters
  private let nextID = Atomic<UInt64>(0)
  /// The answer of the call on the ring; used only under `turn`.
  private let response = AnswerBuffer()
  private let turn = Mutex<Void>(())

  init(moduleID: String, roleChannels: RoleChannels, counters: ModuleCounters) {
    self.moduleID = moduleID
    self.roleChannels = roleChannels
    self.counters = counters
  }

  /// Calls the handler through `ring`, waiting until `deadline` at most; `closed` says whether
  /// the worker went away meanwhile (a call then is UNAVAILABLE, not a timeout to suspect).
  func call(_ call: RoleCall, deadline: UInt64, on ring: CallRing, closed: () -> Bool) -> ServiceReply {
    turn.withLock { _ in send(call, deadline: deadline, on: ring, closed: closed) }
  }

  private func send(_ call: RoleCall, deadline: UInt64, on ring: CallRing, closed: () -> Bool) -> ServiceReply
  {
    // The previous call, if it timed out, holds the slot until the worker answers it.
    let previous = ring.requestSequence
    guard ring.isAnswered(previous) else { return .status(FORSETTI_ERR_BUSY) }
    let id = nextID.add(1, ordering: .relaxed).newValue
    let buffer = response.bytes
    var path = call.path
    path.deadline = deadline
    var sent = call
    sent.path = path
    guard
      let seq = ring.send(
        encoding: { slot in
          var w = WireWriter(into: slot, kind: .serveCall, id: id)
          sent.write(&w)
          return w.length
        }, deadline: deadline)
    else { return .status(FORSETTI_ERR_TOO_LARGE) }
    let n = ring.awaitAnswer(seq, response: buffer, until: deadline)
    guard let n else {
      guard !closed() else { return .status(FORSETTI_ERR_UNAVAILABLE) }
      if !ring.withdraw(seq) {
        roleChannels.suspect(moduleID, "\(call.caller)'s call \"\(call.method)\" timed out")
      }
      return .status(FORSETTI_ERR_TIMEOUT)
    }
    guard let f = try? WireView(UnsafeRawBufferPointer(rebasing: buffer[0..<n])), f.id == id else {
      return .status(FORSETTI_ERR_IO)
    }
    // Counted once answered, as the docs say: a call that timed out was not.
    counters.roleCalls.add(1, ordering: .relaxed)
    return ServiceReply(f, capacity: call.capacity)
  }
}
