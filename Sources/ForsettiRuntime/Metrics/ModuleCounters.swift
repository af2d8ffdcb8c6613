import ForsettiBridge
import Synchronization

/// One module's counters, looked up once per module instance (never per call) and kept for the
/// host's life, so a restarted module counts on.
package final class ModuleCounters: Sendable {
  package let moduleID: String
  /// Host calls served for the module (worker socket and call ring), and their serve times.
  package let hostCalls = LatencyHistogram()
  /// Calls of the module's role handler that it served: those the host carried, counted as
  /// they pass, and those on channels from consumers in workers, added at each scrape
  /// (``collectChannelCalls()``).
  package let roleCalls = Atomic<UInt64>(0)
  /// Calls of the module's role answered FORSETTI_ERR_BUSY (a consumer's queue full) and
  /// FORSETTI_ERR_TIMEOUT, as its consumers' channels count them (each end's claim).
  package let roleBusy = Atomic<UInt64>(0)
  package let roleTimedOut = Atomic<UInt64>(0)
  /// How long calls of the module's role waited for a handler, as its worker counts them.
  package let roleQueueWait = LatencyHistogram()
  package let restarts = Atomic<UInt64>(0)
  package let crashes = Atomic<UInt64>(0)
  /// Crashes by the signal the worker's handler saw (`CrashReport.signalLabel`); the rest of
  /// `crashes` had none (hung, a protocol violation, SIGKILL).
  private let crashSignals = Mutex<[String: UInt64]>([:])
  package let quarantines = Atomic<UInt64>(0)
  /// Log lines and telemetry events the rate limit dropped.
  package let droppedLogLines = Atomic<UInt64>(0)
  package let droppedTelemetryEvents = Atomic<UInt64>(0)
  /// One more crash, by `signal` when its handler saw one.
  package func countCrash(signal: String?) {
    crashes.add(1, ordering: .relaxed)
    if let signal { crashSignals.withLock { $0[signal, default: 0] += 1 } }
  }

  /// `forsetti_module_crashes_total`'s series: each signal's count, and `none` for the rest.
  package var crashesBySignal: [(signal: String, count: UInt64)] {
    let signals = crashSignals.withLock { $0 }
    let total = crashes.load(ordering: .relaxed)
    let seen = signals.values.reduce(0, &+)
    return [("none", total >= seen ? total - seen : 0)]
      + signals.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
  }

  /// The cgroup directories of the module's current worker (read at scrape time); empty
  /// in-process or without cgroups.
  private let cgroupDirectories = Mutex<[String]>([])

  /// The channels this module's worker serves its role on, with the answer sequence last seen.
  /// Held here until read closed, which also keeps each mapped for that last read.
  private let channels = Mutex<[Watched]>([])
  /// The host's own calls of the role (its serve ring), for the calls in flight.
  private let serveRing = Mutex<CallRing?>(nil)

  private struct Watched {
    let ring: ChannelRing
    var seen: UInt32
    var counted: ChannelRing.Counters
  }

  init(moduleID: String) { self.moduleID = moduleID }

  /// Counts the calls answered on `ring`, a new channel to this module's role, from now on.
  package func countRoleCalls(on ring: ChannelRing) {
    channels.withLock { list in
      // Closed ones are counted and let go here too: without scrapes (no --metrics) each
      // restart of a consumer or this provider would keep a mapping for the host's life.
      collect(&list, closedOnly: true)
      list.append(Watched(ring: ring, seen: ring.answered, counted: ring.counters))
    }
  }

  /// The serve ring of the module's current worker (the host's own calls of its role).
  package func watchServeRing(_ ring: CallRing?) { serveRing.withLock { $0 = ring } }

  /// Calls of the module's role waiting for a handler and running now, on every lane.
  package var roleLoad: (queued: UInt64, running: UInt64) {
    var queued: UInt64 = 0
    var running: UInt64 = 0
    func look(_ v: CallRing.LaneView) {
      if v.isRunning { running += 1 } else if v.isQueued { queued += 1 }
    }
    if let ring = serveRing.withLock({ $0 }) { look(ring.view) }
    for w in channels.withLock({ $0 }) where !w.ring.isClosed {
      for lane in w.ring.lanes { look(lane.view) }
    }
    return (queued, running)
  }

  /// Adds to ``roleCalls`` the answers published on each channel since the last look, and lets
  /// closed channels go after that look. Calls on a channel never pass the host, so they are
  /// read from its ring's answer sequence, which the two workers can write: a step back or a
  /// leap of more than 2^31 at once (no module answers that many between two scrapes) is not
  /// counted, so a scribbling module can raise the count by at most that much per scrape.
  package func collectChannelCalls() {
    channels.withLock { collect(&$0, closedOnly: false) }
  }

  private func collect(_ list: inout [Watched], closedOnly: Bool) {
    // Closed is read first: a ring closed after its last count is counted again next time.
    let closed = list.map { $0.ring.isClosed }
    for i in list.indices where closed[i] || !closedOnly {
      let now = list[i].ring.answered
      roleCalls.add(Self.step(list[i].seen, now), ordering: .relaxed)
      list[i].seen = now
      let c = list[i].ring.counters
      let was = list[i].counted
      roleBusy.add(Self.step(was.busy, c.busy), ordering: .relaxed)
      roleTimedOut.add(Self.step(was.timedOut, c.timedOut), ordering: .relaxed)
      for (bucket, n) in zip(was.waits, c.waits).map({ Self.step($0, $1) }).enumerated() {
        roleQueueWait.add(bucket: bucket, count: n)
      }
      let micro = c.waitSumMicroseconds &- was.waitSumMicroseconds
      if micro < 1 << 40 { roleQueueWait.add(sumNanoseconds: micro &* 1_000) }
      list[i].counted = c
    }
    list = zip(list, closed).filter { !$0.1 }.map(\.0)
  }

  /// How far a counter the workers write moved: a step back, or a leap of 2^31 or more at once
  /// (no module does that many between two looks), is not counted.
  private static func step(_ was: UInt32, _ now: UInt32) -> UInt64 {
    let step = now &- was
    return step < 1 << 31 ? UInt64(step) : 0
  }

  /// Where the module's worker's cgroup is now; `[]` when it has none.
  package func setCgroup(_ directories: [String]) { cgroupDirectories.withLock { $0 = directories } }

  package var cgroup: [String] { cgroupDirectories.withLock { $0 } }
}
