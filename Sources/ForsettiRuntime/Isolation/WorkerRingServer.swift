import CForsettiSys
import ForsettiBridge
import Synchronization

/// The host's server of one worker's call ring, run by `WorkerLoop` threads when the worker's
/// doorbell rings.
final class WorkerRingServer: Sendable {
  /// Whether a loop thread is at the call ring (`ready`).
  private let serving = Atomic<Bool>(false)
  /// How long a loop thread spins for this worker's next call after answering one.
  private let serverSpin = SpinBudget(ceiling: CallRing.spinNanoseconds)
  static let callsPerTurn = 64

  /// Serves the synchronous channel while the worker calls: answers what is waiting, spins for
  /// the next call for a moment while another loop thread is free (a worker calling in a loop
  /// then never waits for a wake-up), then sleeps until the worker rings. After `callsPerTurn`
  /// answers the ring goes to the back of the loop's queue, so a worker calling without pause
  /// holds one thread at most, and only while no other worker waits.
  ///
  /// The doorbell is edge-triggered and never disarmed (no system call per sleep), so two loop
  /// threads can be here at once: `serving` lets one in. One that found the ring taken leaves
  /// it; the thread that had it looks once more after letting go, so a ring that came meanwhile
  /// is never left unanswered.
  func ready(
    _ t: WorkerLoop.Thread, calls: CallRing, doorbell: Int32, counters: ModuleCounters,
    _ answerCall: (UnsafeRawBufferPointer, UnsafeMutableRawBufferPointer) -> Int
  ) -> WorkerLoop.Next {
    while !calls.isClosed {
      guard
        serving.compareExchange(expected: false, desired: true, ordering: .sequentiallyConsistent).exchanged
      else { return .again }
      let turn = serve(t, calls, counters, answerCall)
      serving.store(false, ordering: .sequentiallyConsistent)
      switch turn {
      case .closed: return .done
      case .yielded:
        // Back of the queue; the bell, rung once the ring is free, brings a thread back.
        _ = forsetti_eventfd_ring(doorbell)
        return .again
      case .asleep:
        guard calls.hasPending else { return .again }
      }
    }
    return .done
  }

  private enum RingTurn { case asleep, yielded, closed }

  /// One thread's turn at the ring, `serving` held.
  private func serve(
    _ t: WorkerLoop.Thread, _ calls: CallRing, _ counters: ModuleCounters,
    _ answerCall: (UnsafeRawBufferPointer, UnsafeMutableRawBufferPointer) -> Int
  ) -> RingTurn {
    calls.serverAwake()
    var answered = 0
    while !calls.isClosed {
      // Counted once the answer is published: the worker runs on while the clock is read again.
      let start = HostMetrics.now()
      if calls.answerPending(copy: t.scratch, answerCall) {
        counters.hostCalls.record(nanoseconds: HostMetrics.now() &- start)
        answered += 1
        if answered >= Self.callsPerTurn { return .yielded }
        continue
      }
      if spinForNextCall(t, calls) { continue }
      if calls.serverSleeps() { return .asleep }
      calls.serverAwake()
    }
    return .closed
  }

  /// Spins while the worker may call again soon (as `serverSpin` has learnt) and another loop
  /// thread is free; true when a call came.
  private func spinForNextCall(_ t: WorkerLoop.Thread, _ calls: CallRing) -> Bool {
    let spin = serverSpin.next
    guard spin > 0 else { return false }
    let came = calls.spinForRequest(spin) { t.othersIdle }
    serverSpin.record(answeredWhileSpinning: came)
    return came
  }
}
