import ForsettiBridge
import Synchronization

/// One module's counters, looked up once per module instance (never per call) and kept for the
/// host's life, so a restarted module counts on.
public final class ModuleCounters: Sendable {
  public let moduleID: String
  /// Host calls served for the module (worker socket and call ring), and their serve times.
  public let hostCalls = LatencyHistogram()
  /// Calls of the module's role handler that it served: those the host carried, counted as
  /// they pass, and those on channels from consumers in workers, added at each scrape
  /// (``collectChannelCalls()``).
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

  /// The channels this module's worker serves its role on, with the answer sequence last seen.
  /// Held here until read closed, which also keeps each mapped for that last read.
  private let channels = Mutex<[(ring: CallRing, seen: UInt32)]>([])

  init(moduleID: String) { self.moduleID = moduleID }

  /// Counts the calls answered on `ring`, a new channel to this module's role, from now on.
  package func countRoleCalls(on ring: CallRing) {
    channels.withLock { list in
      // Closed ones are counted and let go here too: without scrapes (no --metrics) each
      // restart of a consumer or this provider would keep a mapping for the host's life.
      collect(&list, closedOnly: true)
      list.append((ring, ring.answeredSequence))
    }
  }

  /// Adds to ``roleCalls`` the answers published on each channel since the last look, and lets
  /// closed channels go after that look. Calls on a channel never pass the host, so they are
  /// read from its ring's answer sequence, which the two workers can write: a step back or a
  /// leap of more than 2^31 at once (no module answers that many between two scrapes) is not
  /// counted, so a scribbling module can raise the count by at most that much per scrape.
  public func collectChannelCalls() {
    channels.withLock { collect(&$0, closedOnly: false) }
  }

  private func collect(_ list: inout [(ring: CallRing, seen: UInt32)], closedOnly: Bool) {
    // Closed is read first: a ring closed after its last count is counted again next time.
    let closed = list.map { $0.ring.isClosed }
    for i in list.indices where closed[i] || !closedOnly {
      let now = list[i].ring.answeredSequence
      let step = now &- list[i].seen
      if step < 1 << 31 { roleCalls.add(UInt64(step), ordering: .relaxed) }
      list[i].seen = now
    }
    list = zip(list, closed).filter { !$0.1 }.map(\.0)
  }

  /// Where the module's worker's cgroup is now; `[]` when it has none.
  public func setCgroup(_ directories: [String]) { cgroupDirectories.withLock { $0 = directories } }

  public var cgroup: [String] { cgroupDirectories.withLock { $0 } }
}
