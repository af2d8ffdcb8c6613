import ForsettiCore
import ForsettiRuntime
import FoundationEssentials
import Glibc

/// `forsetti-host override module|product ID on|off|clear [--from T] [--until T]` and
/// `forsetti-host override list`: the persisted and time-frame providers in STATE/overrides.json.
enum OverrideCommand {
  static let spec = CommandSpec(
    name: "override",
    abstract:
      "Force a module or product on or off (persisted, or in time windows), clear it, or list overrides.",
    discussion: """
      FORMS:
        override module|product ID on|off           set the persisted override of ID
        override module|product ID on|off --from T --until T
                                                    add a time-frame window (either bound may be open)
        override module|product ID clear            clear the persisted override and every window of ID
        override module|product ID clear --persisted    only the persisted override
        override module|product ID clear --windows      only the windows
        override module|product ID clear --from T --until T   only the windows with exactly these bounds
        override module|product ID on|off|clear --in-memory
                                                    the running host's in-memory override (gone when it stops)
        override list [--json]                      every provider's entries, per channel and ID

      Overrides are evaluated before the entitlement provider: the module channel first (a
      decision there short-circuits the product check), then the product channel; in each,
      the persisted override, then the in-memory one (held by a running host only), then the
      time-frame windows; the first on/off wins. An ID may have several windows; a window of
      the other state that overlaps one already stored, or the same window twice, is refused.
      --from (inclusive) and --until (exclusive) take ISO 8601 instants (2027-01-01T00:00:00Z).
      Written to STATE/overrides.json atomically; a running host applies it at once.
      """,
    options: [
      .value("from", "INSTANT", "Start of the window (inclusive)."),
      .value("until", "INSTANT", "End of the window (exclusive)."),
      .flag("persisted", "With clear: clear only the persisted override."),
      .flag("windows", "With clear: clear only the time-frame windows."),
      .flag("in-memory", "Set or clear the running host's in-memory override (gone when it stops)."),
      .flag("json", "Print the result as JSON."),
      .state("State directory."),
    ],
    positionals: [
      PositionalSpec("module|product|list", "Which channel, or list."),
      PositionalSpec("ID", "Module ID or product ID.", optional: true),
      PositionalSpec("on|off|clear", "What to do.", optional: true),
    ])

  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    let state = p.stateDirectory
    let store = OverrideStore(stateDirectory: state)
    if p.positionals[0] == "list" { return try list(p, store: store, console: console) }
    if p.flag("in-memory") {
      throw .configuration(
        .directory(
          option: "state", path: state,
          reason: "no host is running on \(state); an in-memory override lives only in a running host"))
    }
    guard let channel = OverrideChannel(rawValue: p.positionals[0]) else {
      throw .usage(
        .invalidValue(option: "channel", value: p.positionals[0], why: "expected module, product or list"))
    }
    guard p.positionals.count == 3 else {
      throw .usage(.missingArgument(p.positionals.count == 1 ? "ID" : "on|off|clear"))
    }
    let (id, action) = (p.positionals[1], p.positionals[2])
    guard ["on", "off", "clear"].contains(action) else {
      throw .usage(.invalidValue(option: "action", value: action, why: "expected on, off or clear"))
    }
    if action != "clear" {
      for flag in ["persisted", "windows"] where p.flag(flag) {
        throw .usage(.unexpectedArgument("--\(flag)"))
      }
    }
    let window = try window(p, state: OverrideState(rawValue: action) ?? .unset)
    // Read, change and write are one transaction (STATE/state.lock), so no concurrent writer's
    // change is lost; "done" is printed only once the file is on disk.
    let (entry, what, done) = try store.update(
      mapError: {
        CommandFailure.configuration(.file(option: "state", path: store.path, reason: $0.description))
      }
    ) { (c: inout OverrideStore.Content) throws(CommandFailure) in
      var entry = c[channel][id] ?? .init()
      let what: String
      // The JSON form's account of what was done, beside the sentence of the text form.
      var done = JSONObject()
      switch (action, window) {
      case ("clear", let w?):
        let kept = entry.windows.filter { $0.span.from != w.span.from || $0.span.until != w.span.until }
        guard kept.count < entry.windows.count else {
          throw .usage(
            .invalidValue(
              option: w.from == nil ? "until" : "from", value: w.from ?? w.until ?? "",
              why: "\(channel.rawValue) \(id) has no window \(bounds(w)); \(stored(entry))"))
        }
        what = "\(count(entry.windows.count - kept.count, "window")) \(bounds(w)) cleared"
        done = JSONObject([
          ("action", .string("clear")), ("clearedPersisted", .null),
          ("clearedWindows", .array(entry.windows.filter { !kept.contains($0) }.map(windowJSON))),
        ])
        entry.windows = kept
      case ("clear", nil):
        let (persisted, windows) = (p.flag("persisted"), p.flag("windows"))
        var cleared: [String] = []
        done = JSONObject([
          ("action", .string("clear")), ("clearedPersisted", .null), ("clearedWindows", .array([])),
        ])
        if persisted || !windows, entry.state != .unset {
          done["clearedPersisted"] = .string(entry.state.rawValue)
          cleared.append("persisted \(entry.state.rawValue)")
          entry.state = .unset
        }
        if windows || !persisted, !entry.windows.isEmpty {
          cleared.append(count(entry.windows.count, "window"))
          done["clearedWindows"] = .array(entry.windows.map(windowJSON))
          entry.windows = []
        }
        what = cleared.isEmpty ? "nothing to clear" : cleared.joined(separator: " and ") + " cleared"
      case (_, let w?):
        if let same = entry.windows.first(where: { $0.sameAs(w) }) {
          throw .usage(
            .invalidValue(
              option: w.from == nil ? "until" : "from", value: w.from ?? w.until ?? "",
              why: "\(channel.rawValue) \(id) already has the window \(same.text)"))
        }
        if let clash = entry.windows.first(where: { $0.state != w.state && $0.overlaps(w) }) {
          throw .usage(
            .invalidValue(
              option: w.from == nil ? "until" : "from", value: w.from ?? w.until ?? "",
              why:
                "the window \(w.text) overlaps the window \(clash.text) of \(channel.rawValue) \(id): which one decides would depend on the order they were added; choose bounds that do not overlap, or clear that window first (override \(channel.rawValue) \(id) clear \(flags(clash)))"
            ))
        }
        entry.windows.append(w)
        what = "window \(w.text) added"
        done = JSONObject([("action", .string("addWindow")), ("window", windowJSON(w))])
      case (_, nil):
        let state = OverrideState(rawValue: action) ?? .unset
        what = entry.state == state ? "persisted \(action) (unchanged)" : "forced \(action) (persisted)"
        done = JSONObject([
          ("action", .string("set")), ("state", .string(action)), ("changed", .bool(entry.state != state)),
        ])
        entry.state = state
      }
      c[channel][id] = entry
      return (entry, what, done)
    }
    let note =
      entry.state != .unset && !entry.windows.isEmpty && action != "clear"
      ? "the persisted \(entry.state.rawValue) decides before any window; windows count once it is cleared (override \(channel.rawValue) \(id) clear --persisted)"
      : nil
    if p.flag("json") {
      var o = JSONObject([("channel", .string(channel.rawValue)), ("id", .string(id))])
      for (k, v) in done.members { o[k] = v }
      o["done"] = .string(what)
      o["persisted"] = entry.state == .unset ? .null : .string(entry.state.rawValue)
      o["windows"] = .array(entry.windows.map(windowJSON))
      o["note"] = .string(orNull: note)
      console.out(JSONWriter.string(.object(o), pretty: true) + "\n")
      return .success
    }
    var out = "\(channel.rawValue) \(id): \(what)\n  stored now: \(stored(entry))\n"
    if let note { out += "  note: \(note)\n" }
    console.out(out)
    return .success
  }

  /// The JSON answer of `override module|product ID on|off|clear --in-memory` (a running host's).
  static func inMemoryJSON(channel: OverrideChannel, id: String, state: OverrideState, done: String) -> String
  {
    var o = JSONObject([
      ("channel", .string(channel.rawValue)), ("id", .string(id)),
      ("action", .string(state == .unset ? "clear" : "set")),
    ])
    o["inMemory"] = state == .unset ? .null : .string(state.rawValue)
    o["done"] = .string(done)
    return JSONWriter.string(.object(o), pretty: true) + "\n"
  }

  /// The window `--from`/`--until` describe, if either is given; nil otherwise.
  static func window(_ p: ParsedArguments, state: OverrideState) throws(CommandFailure) -> OverrideStore
    .Window?
  {
    for name in ["from", "until"] {
      if let v = p.value(name), Licence.parseTime(v) == nil {
        throw .usage(
          .invalidValue(
            option: name, value: v, why: "expected an ISO 8601 instant such as 2027-01-01T00:00:00Z"))
      }
    }
    guard p.value("from") != nil || p.value("until") != nil else { return nil }
    let w = OverrideStore.Window(state: state, from: p.value("from"), until: p.value("until"))
    if let f = w.span.from, let u = w.span.until, f >= u {
      throw .usage(
        .invalidValue(
          option: "until", value: w.until ?? "", why: "expected an instant after --from \(w.from ?? "")"))
    }
    return w
  }

  static func list(_ p: ParsedArguments, store: OverrideStore, console: Console) throws(CommandFailure)
    -> ExitCode
  {
    if p.positionals.count > 1 { throw .usage(.unexpectedArgument(p.positionals[1])) }
    for name in ["from", "until"] where p.value(name) != nil {
      throw .usage(.unexpectedArgument("--\(name)"))
    }
    for name in ["persisted", "windows"] where p.flag(name) { throw .usage(.unexpectedArgument("--\(name)")) }
    let c: OverrideStore.Content
    do { c = try store.load() } catch {
      throw .configuration(.file(option: "state", path: store.path, reason: error.description))
    }
    let now = Date().timeIntervalSince1970
    if !p.flag("json") { console.out("overrides in \(store.path) (read from the file)\n") }
    console.out(listing(content: c, inMemory: nil, now: now, json: p.flag("json")))
    return .success
  }

  /// `override list` as text or JSON: every provider's entries per channel and ID, each window
  /// with whether it is in effect at `now`, and what each ID's channel says now. `inMemory`
  /// is the running host's table; nil when only the files were read.
  static func listing(
    content: OverrideStore.Content, inMemory: InMemoryOverrides.Tables?, now: Instant, json: Bool
  ) -> String {
    if json { return JSONWriter.string(listingJSON(content: content, inMemory: inMemory, now: now)) + "\n" }
    let channels = OverrideStore.channels(content, inMemory: inMemory ?? ([:], [:]))
    var out = "at \(time(now))\n"
    for channel in OverrideChannel.allCases {
      let ids = self.ids(content, inMemory, channel)
      guard !ids.isEmpty else {
        out += "\(channel.rawValue) overrides: none\n"
        continue
      }
      out += "\(channel.rawValue) overrides:\n"
      for id in ids {
        let entry = content[channel][id] ?? .init()
        out += "  \(id)\n"
        out += "    persisted:  \(entry.state == .unset ? "none" : entry.state.rawValue)\n"
        if let inMemory {
          let s = (channel == .module ? inMemory.modules : inMemory.products)[id] ?? .unset
          out += "    in-memory:  \(s == .unset ? "none" : s.rawValue)\n"
        }
        if entry.windows.isEmpty { out += "    time-frame: none\n" }
        for w in entry.windows { out += "    time-frame: \(w.text) (\(status(w, now).text))\n" }
        let decided = decision(channels, channel, id, now)
        var line = decided.map { "\($0.state.rawValue), decided by \($0.provider)" } ?? "no override"
        if inMemory == nil && decided?.provider != "persisted" {
          line += " (an in-memory override of a running host would come first)"
        }
        out += "    now: \(line)\n"
      }
    }
    if inMemory == nil { out += "in-memory: only a running host has them\n" }
    return out
  }

  /// The JSON form of `listing`.
  static func listingJSON(content: OverrideStore.Content, inMemory: InMemoryOverrides.Tables?, now: Instant)
    -> JSONValue
  {
    let channels = OverrideStore.channels(content, inMemory: inMemory ?? ([:], [:]))
    func table(_ channel: OverrideChannel) -> JSONValue {
      .object(
        JSONObject(
          ids(content, inMemory, channel).map { id in
            let entry = content[channel][id] ?? .init()
            var o = JSONObject([
              ("persisted", entry.state == .unset ? .null : .string(entry.state.rawValue))
            ])
            if let inMemory {
              let s = (channel == .module ? inMemory.modules : inMemory.products)[id] ?? .unset
              o["inMemory"] = s == .unset ? .null : .string(s.rawValue)
            }
            o["windows"] = .array(
              entry.windows.map { w in
                guard case .object(var wo) = windowJSON(w) else { return windowJSON(w) }
                let s = status(w, now)
                wo["inEffect"] = .bool(s == .inEffect)
                wo["status"] = .string(s.rawValue)
                return .object(wo)
              })
            let d = decision(channels, channel, id, now)
            o["now"] = .object(
              JSONObject([
                ("state", .string(d?.state.rawValue ?? OverrideState.unset.rawValue)),
                ("provider", .string(orNull: d?.provider)),
              ]))
            return (id, .object(o))
          }))
    }
    return .object(
      JSONObject([
        ("now", .string(time(now))), ("inMemoryKnown", .bool(inMemory != nil)), ("modules", table(.module)),
        ("products", table(.product)),
      ]))
  }

  /// Where a window stands at an instant.
  enum WindowStatus: String {
    case inEffect, notYet, ended

    var text: String {
      switch self {
      case .inEffect: "in effect"
      case .notYet: "not yet in effect"
      case .ended: "ended"
      }
    }
  }

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

  static func windowJSON(_ w: OverrideStore.Window) -> JSONValue {
    var o = JSONObject([("state", .string(w.state.rawValue))])
    o["from"] = .string(orNull: w.from)
    o["until"] = .string(orNull: w.until)
    return .object(o)
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

  static func flags(_ w: OverrideStore.Window) -> String {
    [w.from.map { "--from \($0)" }, w.until.map { "--until \($0)" }].compactMap { $0 }.joined(separator: " ")
  }

  static func count(_ n: Int, _ noun: String) -> String { n == 1 ? "1 \(noun)" : "\(n) \(noun)s" }

  static func time(_ t: Instant) -> String {
    Date(timeIntervalSince1970: t).formatted(.iso8601)
  }
}
