import ForsettiCore
import ForsettiRuntime

/// `forsetti-host override module|product ID on|off|clear [--from T --until T]`.
enum OverrideCommand {
  static let spec = CommandSpec(
    name: "override",
    abstract: "Force a module or product on or off (persisted, or between two instants), or clear it.",
    discussion: """
      Overrides are evaluated before the entitlement provider: the module channel first (a
      decision there short-circuits the product check), then the product channel; in each,
      the persisted store, then in-memory, then time-frame overrides; the first on/off wins.
      --from/--until take ISO 8601 instants (2027-01-01T00:00:00Z); either may be left open.
      Written to STATE/overrides.json atomically.
      """,
    options: [
      .value("from", "INSTANT", "Start of the time frame (inclusive)."),
      .value("until", "INSTANT", "End of the time frame (exclusive)."),
      .value("state", "DIR", "State directory.", default: ".forsetti"),
    ],
    positionals: [
      PositionalSpec("module|product", "Which channel."), PositionalSpec("ID", "Module ID or product ID."),
      PositionalSpec("on|off|clear", "What to do."),
    ])

  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    let (channel, id, action) = (p.positionals[0], p.positionals[1], p.positionals[2])
    guard channel == "module" || channel == "product" else {
      throw .usage(.invalidValue(option: "channel", value: channel, why: "expected module or product"))
    }
    guard ["on", "off", "clear"].contains(action) else {
      throw .usage(.invalidValue(option: "action", value: action, why: "expected on, off or clear"))
    }
    for name in ["from", "until"] {
      if let v = p.value(name), Licence.parseTime(v) == nil {
        throw .usage(
          .invalidValue(
            option: name, value: v, why: "expected an ISO 8601 instant such as 2027-01-01T00:00:00Z"))
      }
    }
    let store = OverrideStore(stateDirectory: p.value("state") ?? ".forsetti")
    var c: OverrideStore.Content
    do { c = try store.load() } catch {
      throw .configuration(.file(option: "state", path: store.path, reason: error.description))
    }
    let entry = OverrideState(rawValue: action).map {
      OverrideStore.Entry(state: $0, from: p.value("from"), until: p.value("until"))
    }
    if channel == "module" { c.modules[id] = entry } else { c.products[id] = entry }
    do { try store.save(c) } catch {
      throw .configuration(.file(option: "state", path: store.path, reason: error.description))
    }
    let window = [p.value("from").map { "from \($0)" }, p.value("until").map { "until \($0)" }].compactMap {
      $0
    }.joined(separator: " ")
    console.out(
      entry == nil
        ? "\(channel) override of \(id) cleared\n"
        : "\(channel) \(id) forced \(action)\(window.isEmpty ? "" : " " + window)\n")
    return .success
  }
}
