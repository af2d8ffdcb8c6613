import Synchronization

/// One module's counters, looked up once per module instance (never per call) and kept for the
/// host's life, so a restarted module counts on.
public final class ModuleCounters: Sendable {
  public let moduleID: String
  /// Host calls served for the module (worker socket and call ring), and their serve times.
  public let hostCalls = LatencyHistogram()
  /// Calls of the module's role handler that it served.
  public let roleCalls = Atomic<UInt64>(0)
  public let restarts = Atomic<UInt64>(0)
  public let crashes = Atomic<UInt64>(0)
  public let quarantines = Atomic<UInt64>(0)
  /// Log lines and telemetry events the rate limit dropped.
  public let droppedLogLines = Atomic<UInt64>(0)
  public let droppedTelemetryEvents = Atomic<UInt64>(0)
  /// The cgroup directories of the module's current worker (read at scrape time); empty
  /// in-process or without cgroups.
  private let cgroupDirectories = Mutex<[String]>([])

  init(moduleID: String) { self.moduleID = moduleID }

  /// Where the module's worker's cgroup is now; `[]` when it has none.
  public func setCgroup(_ directories: [String]) { cgroupDirectories.withLock { $0 = directories } }

  public var cgroup: [String] { cgroupDirectories.withLock { $0 } }
}
