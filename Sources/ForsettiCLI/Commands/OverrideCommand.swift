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
    let order = OverrideOrder(
      channel: channel, id: p.positionals[1], action: action, from: p.value("from"),
      until: p.value("until"), persisted: p.flag("persisted"), windows: p.flag("windows"),
      inMemory: p.flag("in-memory"))
    do { try OverrideOrderError.check(order) } catch { throw .usage(usage(error)) }
    return .override(order)
  }

  /// An order's own fault, told with the options that gave it.
  static func usage(_ fault: OverrideOrderError) -> UsageError {
    let spelling = FailureFields.spelling
    return switch fault {
    case .onlyWithClear(let field): .unexpectedArgument(spelling(field).text)
    case .notWithInMemory(let field, _):
      .notWith(option: spelling(field).name, other: spelling(.inMemory).name)
    case .notAnInstant(let field, let value):
      .invalidValue(option: spelling(field).name, value: value, why: OverrideOrderError.instantExpected)
    case .untilNotAfterFrom(let from, let until):
      .invalidValue(
        option: spelling(.until).name, value: until,
        why: "expected an instant after \(spelling(.from).text) \(from)")
    }
  }

  /// `override list`'s listing or an order's answer, each read as its type.
  static func render(_ answer: JSONValue, _ p: ParsedArguments, _ console: Console) -> ExitCode {
    p.positionals.first == "list"
      ? ServedVerb.typed(renderListing)(answer, p, console)
      : ServedVerb.typed(renderOrder)(answer, p, console)
  }

  static func renderListing(_ listing: OverrideListing, _ p: ParsedArguments, _ console: Console) -> ExitCode
  {
    if p.flag("json") {
      console.out(JSONWriter.string(listing.json) + "\n")
      return .success
    }
    if !listing.inMemoryKnown {
      console.out(
        "overrides in \(OverrideStore(stateDirectory: p.stateDirectory).path) (read from the file)\n")
    }
    console.out(text(listing))
    return .success
  }

  static func renderOrder(_ answer: OverrideAnswer, _ p: ParsedArguments, _ console: Console) -> ExitCode {
    if p.flag("json") {
      ServedVerb.printJSON(answer.json, console)
      return .success
    }
    // The host's words off a socket, naming an ID as asked: shown by the module-text rule.
    let head = LogRecord.streamSafe("\(answer.channel.rawValue) \(answer.id): \(answer.done)") + "\n"
    guard let stored = answer.stored else {
      console.out(head)
      return .success
    }
    var out = head + "  stored now: \(LogRecord.streamSafe(stored.text))\n"
    if let note = stored.note { out += "  note: \(LogRecord.streamSafe(note))\n" }
    console.out(out)
    return .success
  }

  /// `override list`'s text: every provider's entries per channel and ID, and which decides now.
  static func text(_ listing: OverrideListing) -> String {
    let known = listing.inMemoryKnown
    // IDs and values are read from a state file and off a socket: shown by the module-text rule.
    let s = LogRecord.streamSafe
    var out = "at \(s(listing.at))\n"
    for (channel, table) in [("module", listing.modules), ("product", listing.products)] {
      guard !table.isEmpty else {
        out += "\(channel) overrides: none\n"
        continue
      }
      out += "\(channel) overrides:\n"
      for e in table {
        out += "  \(s(e.id))\n"
        out += "    persisted:  \(s(e.persisted ?? "none"))\n"
        if known { out += "    in-memory:  \(s(e.inMemory ?? "none"))\n" }
        if e.windows.isEmpty { out += "    time-frame: none\n" }
        for w in e.windows { out += "    time-frame: \(s(w.text)) (\(s(w.status?.text ?? "?")))\n" }
        var line = e.now != "unset" ? "\(s(e.now)), decided by \(s(e.decidedBy ?? "?"))" : "no override"
        if !known && e.decidedBy != "persisted" {
          line += " (an in-memory override of a running host would come first)"
        }
        out += "    now: \(line)\n"
      }
    }
    if !known { out += "in-memory: only a running host has them\n" }
    return out
  }
}
