import ForsettiBridge
import Synchronization

/// The host's counters behind `/metrics`: one `ModuleCounters` per module ID (found under a
/// lock once per module instance; the hot path then touches only its atomics), and the host's
/// own judging and reconcile counts and times.
public final class HostMetrics: Sendable {
  private let modules = Mutex<[String: ModuleCounters]>([:])
  /// Judge rounds (every gate for every module) and their durations.
  public let judgings = LatencyHistogram()
  /// Reconcile rounds (a change converged on) and their durations.
  public let reconciles = LatencyHistogram()

  public init() {}

  /// The counters of `moduleID`, made on first use.
  public func module(_ moduleID: String) -> ModuleCounters {
    modules.withLock { m in
      if let c = m[moduleID] { return c }
      let c = ModuleCounters(moduleID: moduleID)
      m[moduleID] = c
      return c
    }
  }

  /// Every module's counters, by module ID.
  public var allModules: [ModuleCounters] {
    modules.withLock { Array($0.values) }.sorted { $0.moduleID < $1.moduleID }
  }

  /// CLOCK_MONOTONIC in nanoseconds (a vDSO read, no system call): the call ring's own clock.
  public static func now() -> UInt64 { CallRing.nanoseconds() }
}
