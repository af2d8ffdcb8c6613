import ForsettiBridge
import Synchronization

/// The host's counters behind `/metrics`: one `ModuleCounters` per module ID (found under a
/// lock once per module instance; the hot path then touches only its atomics), and the host's
/// own judging and reconcile counts and times.
package final class HostMetrics: Sendable {
  private let modules = Mutex<[String: ModuleCounters]>([:])
  /// Judge rounds (every gate for every module) and their durations.
  package let judgings = LatencyHistogram()
  /// Reconcile rounds (a change converged on) and their durations.
  package let reconciles = LatencyHistogram()

  package init() {}

  /// The counters of `moduleID`, made on first use.
  package func module(_ moduleID: String) -> ModuleCounters {
    modules.withLock { m in
      if let c = m[moduleID] { return c }
      let c = ModuleCounters(moduleID: moduleID)
      m[moduleID] = c
      return c
    }
  }

  /// Every module's counters, by module ID.
  package var allModules: [ModuleCounters] {
    modules.withLock { Array($0.values) }.sorted { $0.moduleID < $1.moduleID }
  }

  /// CLOCK_MONOTONIC in nanoseconds (a vDSO read, no system call): the call ring's own clock.
  package static func now() -> UInt64 { CallRing.nanoseconds() }
}
