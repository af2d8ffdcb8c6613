import Synchronization

/// How long one side of a ring spins for the other before it sleeps, learnt from how its last
/// waits ended. Spinning wins only while the other side has a CPU of its own: on a machine with
/// more runnable threads than CPUs (a load of 12 on two), the spinner holds the CPU the other
/// side needs to answer, and every call costs a spin and a scheduler wake-up. So a wait that
/// spun in vain halves the budget (down to none: the side sleeps at once, as a socket echo
/// would), a wait answered within the spin doubles it (up to `ceiling`), and a side that has
/// stopped spinning tries a short spin (`retry`) once every `retryEvery` waits, to find out when
/// the machine is quiet again: one answered brings the whole budget back within a few calls.
package final class SpinBudget: Sendable {
  package let ceiling: UInt64
  private let budget: Atomic<UInt64>
  private let waitsWithout = Atomic<UInt32>(0)
  /// Below this a spin is not worth starting (a futex wait costs about as much).
  package static let floor: UInt64 = 2_000
  package static let retryEvery: UInt32 = 32
  /// The spin tried now and then once spinning stopped: long enough for a round trip on an idle
  /// machine, short enough to cost a loaded one little.
  package var retry: UInt64 { max(Self.floor * 2, ceiling / 8) }

  package init(ceiling: UInt64) {
    self.ceiling = ceiling
    budget = Atomic(ceiling)
  }

  /// The spin for the next wait, in nanoseconds.
  package var next: UInt64 {
    let b = budget.load(ordering: .relaxed)
    guard b < Self.floor else { return b }
    let n = waitsWithout.add(1, ordering: .relaxed).newValue
    return n % Self.retryEvery == 0 ? retry : 0
  }

  /// How the wait ended: answered within its spin, or not (it slept, or spun for nothing).
  package func record(answeredWhileSpinning: Bool) {
    let b = budget.load(ordering: .relaxed)
    let updated = answeredWhileSpinning ? min(ceiling, max(Self.floor, b &* 2)) : b / 2
    if updated != b { budget.store(updated, ordering: .relaxed) }
  }

  /// The spin now, for reports and tests.
  package var current: UInt64 { budget.load(ordering: .relaxed) }
}
