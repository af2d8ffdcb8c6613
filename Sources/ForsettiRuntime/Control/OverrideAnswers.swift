import ForsettiCore
import FoundationEssentials

/// The `override` answers: the persisted override and time-frame windows of a module or
/// product (written in one `StateTransaction`), the running host's in-memory override, and the
/// listing of every provider's entries with the one that decides now.
package enum OverrideAnswers {
  /// The persisted override or a window of a module or product, set or cleared; `order` is one
  /// `OverrideOrderError.check` passed.
  static func set(_ order: OverrideOrder, stateDirectory: String) throws(ControlFailure) -> OverrideAnswer {
    let channel = order.channel
    let (id, action) = (order.id, order.action.rawValue)
    let store = OverrideStore(stateDirectory: stateDirectory)
    let window = window(order, state: OverrideState(rawValue: action) ?? .unset)
    // Read, change and write are one transaction (STATE/state.lock), so no concurrent writer's
    // change is lost; "done" is printed only once the file is on disk.
    let (entry, what, done) = try store.update(
      mapError: { .located(.failed, .stateDirectory, store.path, $0.description) }
    ) { (c: inout OverrideStore.Content) throws(ControlFailure) in
      var entry = c[channel][id] ?? .init()
      let what: String
      // The answer's account of what was done, beside the sentence of the text form.
      var done: OverrideAnswer.Change
      switch (action, window) {
      case ("clear", let w?):
        let kept = entry.windows.filter { $0.span.from != w.span.from || $0.span.until != w.span.until }
        guard kept.count < entry.windows.count else {
          throw .invalid(
            w.from == nil ? .until : .from, w.from ?? w.until ?? "",
            why: "\(channel.rawValue) \(id) has no window \(bounds(w)); \(stored(entry))")
        }
        what = "\(count(entry.windows.count - kept.count, "window")) \(bounds(w)) cleared"
        done = .clear(persisted: nil, windows: entry.windows.filter { !kept.contains($0) }.map(line))
        entry.windows = kept
      case ("clear", nil):
        let (persisted, windows) = (order.persisted, order.windows)
        var cleared: [String] = []
        var clearedState: String?
        var clearedWindows: [OverrideWindowLine] = []
        if persisted || !windows, entry.state != .unset {
          clearedState = entry.state.rawValue
          cleared.append("persisted \(entry.state.rawValue)")
          entry.state = .unset
        }
        if windows || !persisted, !entry.windows.isEmpty {
          cleared.append(count(entry.windows.count, "window"))
          clearedWindows = entry.windows.map(line)
          entry.windows = []
        }
        done = .clear(persisted: clearedState, windows: clearedWindows)
        what = cleared.isEmpty ? "nothing to clear" : cleared.joined(separator: " and ") + " cleared"
      case (_, let w?):
        if let same = entry.windows.first(where: { $0.sameAs(w) }) {
          throw .invalid(
            w.from == nil ? .until : .from, w.from ?? w.until ?? "",
            why: "\(channel.rawValue) \(id) already has the window \(same.text)")
        }
        if let clash = entry.windows.first(where: { $0.state != w.state && $0.overlaps(w) }) {
          throw .invalid(
            w.from == nil ? .until : .from, w.from ?? w.until ?? "",
            why:
              "the window \(w.text) overlaps the window \(clash.text) of \(channel.rawValue) \(id): which one decides would depend on the order they were added; choose bounds that do not overlap, or clear that window first (clear \(bounds(clash)))"
          )
        }
        entry.windows.append(w)
        what = "window \(w.text) added"
        done = .addWindow(line(w))
      case (_, nil):
        let state = OverrideState(rawValue: action) ?? .unset
        what = entry.state == state ? "persisted \(action) (unchanged)" : "forced \(action) (persisted)"
        done = .set(state: action, changed: entry.state != state)
        entry.state = state
      }
      c[channel][id] = entry
      return (entry, what, done)
    }
    let note =
      entry.state != .unset && !entry.windows.isEmpty && action != "clear"
      ? "the persisted \(entry.state.rawValue) decides before any window; windows count once it is cleared (override \(channel.rawValue) \(id) clear --persisted)"
      : nil
    return OverrideAnswer(
      channel: channel, id: id, change: done, done: what,
      stored: OverrideAnswer.Stored(
        persisted: entry.state == .unset ? nil : entry.state.rawValue, windows: entry.windows.map(line),
        note: note))
  }

  /// The running host's in-memory override, held until it stops; `order` is one
  /// `OverrideOrderError.check` passed.
  static func inMemory(_ order: OverrideOrder, overrides: InMemoryOverrides) throws(ControlFailure)
    -> OverrideAnswer
  {
    let channel = order.channel
    let state: OverrideState =
      switch order.action {
      case .on: .on
      case .off: .off
      case .clear: .unset
      }
    _ = overrides.set(channel: channel, id: order.id, state: state)
    return OverrideAnswer(
      channel: channel, id: order.id, change: .inMemory(state: state == .unset ? nil : state.rawValue),
      done: state == .unset
        ? "in-memory override cleared" : "forced \(state.rawValue) in memory (until this host stops)",
      stored: nil)
  }

  /// `override list`: every provider's entries per channel and ID, and which decides now;
  /// `inMemory` nil when no running host answers (nobody knows them).
  package static func listing(stateDirectory: String, inMemory: InMemoryOverrides.Tables?)
    throws(ControlFailure)
    -> OverrideListing
  {
    let store = OverrideStore(stateDirectory: stateDirectory)
    let content: OverrideStore.Content
    do { content = try store.load() } catch {
      throw .located(.failed, .stateDirectory, store.path, error.description)
    }
    return listed(content: content, inMemory: inMemory, now: GateContext.wallClock())
  }

  /// The window `order` gives, if it gives bounds.
  static func window(_ order: OverrideOrder, state: OverrideState) -> OverrideStore.Window? {
    guard order.from != nil || order.until != nil else { return nil }
    return OverrideStore.Window(state: state, from: order.from, until: order.until)
  }

  /// The listing of `content` (and a running host's in-memory overrides) at `now`.
  package static func listed(
    content: OverrideStore.Content, inMemory: InMemoryOverrides.Tables?, now: Instant
  ) -> OverrideListing {
    let channels = OverrideStore.channels(content, inMemory: inMemory ?? ([:], [:]))
    func table(_ channel: OverrideChannel) -> [OverrideListing.Entry] {
      ids(content, inMemory, channel).map { id in
        let entry = content[channel][id] ?? .init()
        let memory = inMemory.map { (channel == .module ? $0.modules : $0.products)[id] ?? .unset } ?? .unset
        let d = decision(channels, channel, id, now)
        return OverrideListing.Entry(
          id: id, persisted: entry.state == .unset ? nil : entry.state.rawValue,
          inMemory: memory == .unset ? nil : memory.rawValue,
          windows: entry.windows.map { w in
            var l = line(w)
            l.status = status(w, now)
            return l
          },
          now: d?.state.rawValue ?? OverrideState.unset.rawValue, decidedBy: d?.provider)
      }
    }
    return OverrideListing(
      at: time(now), inMemoryKnown: inMemory != nil, modules: table(.module), products: table(.product))
  }

  /// Where a window stands at an instant.
  package typealias WindowStatus = OverrideWindowLine.Status

  static func status(_ w: OverrideStore.Window, _ now: Instant) -> WindowStatus {
    let span = w.span
    if span.contains(now) { return .inEffect }
    if let f = span.from, now < f { return .notYet }
    return .ended
  }

  /// The first provider of `channel` with an answer for `id` at `now`, as the judge finds it.
  static func decision(_ c: OverrideChannels, _ channel: OverrideChannel, _ id: String, _ now: Instant)
    -> (state: OverrideState, provider: String)?
  {
    for p in channel == .module ? c.module : c.product {
      let s = p.state(for: id, at: now)
      if s != .unset { return (s, p.name) }
    }
    return nil
  }

  static func ids(_ c: OverrideStore.Content, _ m: InMemoryOverrides.Tables?, _ channel: OverrideChannel)
    -> [String]
  {
    let memory = m.map { channel == .module ? $0.modules : $0.products } ?? [:]
    return Set(c[channel].keys).union(memory.keys).sorted()
  }

  /// A stored window as an answer shows it.
  static func line(_ w: OverrideStore.Window) -> OverrideWindowLine {
    OverrideWindowLine(state: w.state.rawValue, from: w.from, until: w.until)
  }

  /// What is stored for one ID: `persisted off; windows: on from A until B, off from C`.
  static func stored(_ e: OverrideStore.Entry) -> String {
    if e.isEmpty { return "nothing" }
    var parts: [String] = []
    if e.state != .unset { parts.append("persisted \(e.state.rawValue)") }
    if !e.windows.isEmpty { parts.append("windows: " + e.windows.map(\.text).joined(separator: ", ")) }
    return parts.joined(separator: "; ")
  }

  static func bounds(_ w: OverrideStore.Window) -> String {
    [w.from.map { "from \($0)" }, w.until.map { "until \($0)" }].compactMap { $0 }.joined(separator: " ")
  }

  static func count(_ n: Int, _ noun: String) -> String { n == 1 ? "1 \(noun)" : "\(n) \(noun)s" }

  static func time(_ t: Instant) -> String {
    Date(timeIntervalSince1970: t).formatted(.iso8601)
  }
}
