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

  static let served = ServedVerb(
    command: command, judge: { p throws(CommandFailure) in ServedVerb.files(p) }, render: render)

  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    try served.local(p, console)
  }

  /// The typed request the arguments make; what can be refused without the state is refused
  /// here, the rest by whoever answers.
  static func command(_ p: ParsedArguments) throws(CommandFailure) -> ControlCommand {
    if p.positionals[0] == "list" {
      if p.positionals.count > 1 { throw .usage(.unexpectedArgument(p.positionals[1])) }
      for name in ["from", "until"] where p.value(name) != nil {
        throw .usage(.unexpectedArgument("--\(name)"))
      }
      for name in ["persisted", "windows", "in-memory"] where p.flag(name) {
        throw .usage(.unexpectedArgument("--\(name)"))
      }
      return .overrideList
    }
    guard let channel = OverrideOrder.Channel(rawValue: p.positionals[0]) else {
      throw .usage(
        .invalidValue(option: "channel", value: p.positionals[0], why: "expected module, product or list"))
    }
    guard p.positionals.count == 3 else {
      throw .usage(.missingArgument(p.positionals.count == 1 ? "ID" : "on|off|clear"))
    }
    guard let action = OverrideOrder.Action(rawValue: p.positionals[2]) else {
      throw .usage(.invalidValue(option: "action", value: p.positionals[2], why: "expected on, off or clear"))
    }
    return .override(
      OverrideOrder(
        channel: channel, id: p.positionals[1], action: action, from: p.value("from"),
        until: p.value("until"), persisted: p.flag("persisted"), windows: p.flag("windows"),
        inMemory: p.flag("in-memory")))
  }

  static func render(_ answer: JSONValue, _ p: ParsedArguments, _ console: Console) -> ExitCode {
    let o = answer.objectValue ?? JSONObject()
    if p.positionals.first == "list" {
      if p.flag("json") {
        console.out(JSONWriter.string(answer) + "\n")
      } else {
        if o["inMemoryKnown"]?.boolValue != true {
          console.out(
            "overrides in \(OverrideStore(stateDirectory: p.stateDirectory).path) (read from the file)\n")
        }
        console.out(listing(o))
      }
      return .success
    }
    if p.flag("json") {
      ServedVerb.printJSON(answer, console)
      return .success
    }
    let head =
      "\(o["channel"]?.stringValue ?? "?") \(o["id"]?.stringValue ?? "?"): \(o["done"]?.stringValue ?? "")\n"
    if p.flag("in-memory") {
      console.out(head)
      return .success
    }
    var out = head + "  stored now: \(stored(o))\n"
    if let note = o["note"]?.stringValue { out += "  note: \(note)\n" }
    console.out(out)
    return .success
  }

  /// `override list`'s text: every provider's entries per channel and ID, and which decides now.
  static func listing(_ o: JSONObject) -> String {
    let known = o["inMemoryKnown"]?.boolValue == true
    var out = "at \(o["now"]?.stringValue ?? "?")\n"
    for (channel, key) in [("module", "modules"), ("product", "products")] {
      let table = o[key]?.objectValue?.members ?? []
      guard !table.isEmpty else {
        out += "\(channel) overrides: none\n"
        continue
      }
      out += "\(channel) overrides:\n"
      for (id, value) in table {
        let e = value.objectValue ?? JSONObject()
        out += "  \(id)\n"
        out += "    persisted:  \(e["persisted"]?.stringValue ?? "none")\n"
        if known { out += "    in-memory:  \(e["inMemory"]?.stringValue ?? "none")\n" }
        let windows = (e["windows"]?.arrayValue ?? []).compactMap(\.objectValue)
        if windows.isEmpty { out += "    time-frame: none\n" }
        for w in windows {
          let status = OverrideAnswers.WindowStatus(rawValue: w["status"]?.stringValue ?? "")?.text ?? "?"
          out += "    time-frame: \(windowText(w)) (\(status))\n"
        }
        let now = e["now"]?.objectValue
        let provider = now?["provider"]?.stringValue
        let state = now?["state"]?.stringValue ?? "unset"
        var line = state != "unset" ? "\(state), decided by \(provider ?? "?")" : "no override"
        if !known && provider != "persisted" {
          line += " (an in-memory override of a running host would come first)"
        }
        out += "    now: \(line)\n"
      }
    }
    if !known { out += "in-memory: only a running host has them\n" }
    return out
  }

  /// `on from 2027-01-01T00:00:00Z until 2027-02-01T00:00:00Z`.
  static func windowText(_ w: JSONObject) -> String {
    ([w["state"]?.stringValue ?? "?"]
      + [
        w["from"]?.stringValue.map { "from \($0)" }, w["until"]?.stringValue.map { "until \($0)" },
      ].compactMap { $0 }).joined(separator: " ")
  }

  /// What is stored for one ID: `persisted off; windows: on from A until B, off from C`.
  static func stored(_ o: JSONObject) -> String {
    var parts: [String] = []
    if let s = o["persisted"]?.stringValue { parts.append("persisted \(s)") }
    let windows = (o["windows"]?.arrayValue ?? []).compactMap(\.objectValue)
    if !windows.isEmpty { parts.append("windows: " + windows.map(windowText).joined(separator: ", ")) }
    return parts.isEmpty ? "nothing" : parts.joined(separator: "; ")
  }
}
