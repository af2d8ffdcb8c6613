import Dispatch
import Synchronization

/// Token buckets per module for its log lines and its telemetry events, and the count of what
/// each module lost. When a module has lines dropped, one host line says how many and over what
/// period: once it has not been limited for `quietAfter`, and every `summaryEvery` while it
/// goes on. The host's own lines never come here.
package final class ModuleRateLimiter: Sendable {
  /// Which of a module's outputs a line belongs to; each has a bucket of its own.
  package enum Channel: Sendable, Hashable { case log, telemetry }

  package let limits: LogLimits
  private let clock: any RateClock
  private let report: @Sendable (LogRecord) -> Void
  private let sweepsItself: Bool
  /// Told each line or event dropped (the host's metrics count them), outside the lock.
  private let dropped: (@Sendable (String, Channel) -> Void)?
  private let state = Mutex(State())

  private struct Flood {
    var log: TokenBucket
    var telemetry: TokenBucket
    /// Lines of standard output read, limited `outputReadFactor` times more loosely.
    var reads: TokenBucket
    var droppedLines = 0
    var droppedEvents = 0
    var firstDrop: UInt64 = 0
    var lastDrop: UInt64 = 0

    var dropping: Bool { droppedLines > 0 || droppedEvents > 0 }
  }

  private struct State {
    var modules: [String: Flood] = [:]
    var sweepScheduled = false
  }

  /// `report` receives the dropped-lines lines (write them where the host's lines go, past the
  /// limiter). With `sweepsItself`, a timer writes a due count even when the module falls
  /// silent; without it (tests with a manual clock), call ``sweep()``.
  package init(
    limits: LogLimits = .standard, clock: any RateClock = MonotonicClock(), sweepsItself: Bool = true,
    dropped: (@Sendable (String, Channel) -> Void)? = nil, report: @escaping @Sendable (LogRecord) -> Void
  ) {
    self.limits = limits
    self.clock = clock
    self.sweepsItself = sweepsItself
    self.dropped = dropped
    self.report = report
  }

  /// Whether `moduleID` may write a line of `bytes` bytes on `channel` now. A dropped-lines
  /// line that has come due for this module is reported first.
  package func admit(_ moduleID: String, _ channel: Channel, bytes: Int) -> Bool {
    let now = clock.nanoseconds()
    let cost = limits.cost(bytes: bytes)
    let (admitted, summary, schedule) = state.withLock { s -> (Bool, LogRecord?, Bool) in
      var m = s.modules[moduleID] ?? newFlood(now)
      let admitted = channel == .log ? m.log.take(cost, now: now) : m.telemetry.take(cost, now: now)
      if !admitted {
        if !m.dropping { m.firstDrop = now }
        if channel == .log { m.droppedLines &+= 1 } else { m.droppedEvents &+= 1 }
        m.lastDrop = now
      }
      let summary = takeSummary(&m, moduleID, now: now)
      s.modules[moduleID] = m
      let schedule = m.dropping && sweepsItself && !s.sweepScheduled
      if schedule { s.sweepScheduled = true }
      return (admitted, summary, schedule)
    }
    if let summary { report(summary) }
    if schedule { scheduleSweep() }
    if !admitted { dropped?(moduleID, channel) }
    return admitted
  }

  /// Charges an admitted line the rest of its cost once its size is known: a caller admits it
  /// with `bytes: 1` first, so a line that would be dropped is never made.
  package func charge(_ moduleID: String, _ channel: Channel, bytes: Int) {
    let extra = limits.cost(bytes: bytes) - 1
    guard extra > 0 else { return }
    state.withLock { s in
      guard var m = s.modules[moduleID] else { return }
      if channel == .log { m.log.charge(extra) } else { m.telemetry.charge(extra) }
      s.modules[moduleID] = m
    }
  }

  /// How long the reader of `moduleID`'s standard output should wait before handling another
  /// line: 0 (and the line counted) when it may go on now. Waiting, rather than reading and
  /// dropping, leaves a flood in the module's own blocked write.
  package func outputReadDelay(_ moduleID: String) -> Double {
    let now = clock.nanoseconds()
    return state.withLock { s in
      var m = s.modules[moduleID] ?? newFlood(now)
      let delay = m.reads.take(1, now: now) ? 0 : max(0.001, m.reads.secondsUntilOne())
      s.modules[moduleID] = m
      return delay
    }
  }

  private func newFlood(_ now: UInt64) -> Flood {
    let factor = max(1, limits.outputReadFactor)
    return Flood(
      log: TokenBucket(burst: limits.burstLines, perSecond: limits.linesPerSecond, now: now),
      telemetry: TokenBucket(burst: limits.burstLines, perSecond: limits.linesPerSecond, now: now),
      reads: TokenBucket(
        burst: limits.burstLines.multipliedReportingOverflow(by: factor).partialValue,
        perSecond: limits.linesPerSecond.multipliedReportingOverflow(by: factor).partialValue, now: now))
  }

  /// Reports every count that has come due (a module that fell silent mid-flood included).
  package func sweep() {
    sweep(force: false)
  }

  /// Reports every count still held, due or not (at shutdown).
  package func flush() {
    sweep(force: true)
  }

  private func sweep(force: Bool) {
    let now = clock.nanoseconds()
    let (due, again) = state.withLock { s -> ([LogRecord], Bool) in
      var due: [LogRecord] = []
      for id in s.modules.keys.sorted() {
        guard var m = s.modules[id], m.dropping else { continue }
        if let r = force ? summary(&m, id, until: m.lastDrop) : takeSummary(&m, id, now: now) {
          due.append(r)
        }
        s.modules[id] = m
      }
      let again = sweepsItself && s.modules.values.contains { $0.dropping }
      s.sweepScheduled = again
      return (due, again)
    }
    for r in due { report(r) }
    if again { scheduleSweep() }
  }

  private func scheduleSweep() {
    let delay = Int(max(0.05, min(limits.quietAfter, limits.summaryEvery)) * 1000)
    DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + .milliseconds(delay)) {
      [weak self] in self?.sweep()
    }
  }

  /// The count of `m`, if it is due: quiet for `quietAfter`, or flooding for `summaryEvery`.
  private func takeSummary(_ m: inout Flood, _ moduleID: String, now: UInt64) -> LogRecord? {
    guard m.dropping else { return nil }
    let quiet = now >= m.lastDrop && Double(now - m.lastDrop) / 1e9 >= limits.quietAfter
    let long = now >= m.firstDrop && Double(now - m.firstDrop) / 1e9 >= limits.summaryEvery
    guard quiet || long else { return nil }
    return summary(&m, moduleID, until: quiet ? m.lastDrop : now)
  }

  /// The dropped-lines line of `m` for its drops from the first until `until` (the last drop
  /// once it has eased, now while it goes on); its counts start again from zero.
  private func summary(_ m: inout Flood, _ moduleID: String, until: UInt64) -> LogRecord {
    let span = until >= m.firstDrop ? until - m.firstDrop : 0
    let tenths = span / 100_000_000
    let seconds = "\(tenths / 10).\(tenths % 10)"
    var what: [String] = []
    if m.droppedLines > 0 { what.append("\(m.droppedLines) log line\(m.droppedLines == 1 ? "" : "s")") }
    if m.droppedEvents > 0 {
      what.append("\(m.droppedEvents) telemetry event\(m.droppedEvents == 1 ? "" : "s")")
    }
    let record = LogRecord(
      level: .warning, moduleID: moduleID,
      message:
        "rate limit: dropped \(what.joined(separator: " and ")) over \(seconds) s (at most \(limits.linesPerSecond) a second, bursts of \(limits.burstLines))",
      metadata: ["dropped": "\(m.droppedLines)", "dropped_events": "\(m.droppedEvents)", "seconds": seconds],
      origin: .host)
    m.droppedLines = 0
    m.droppedEvents = 0
    return record
  }
}
