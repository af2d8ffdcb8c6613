import ForsettiCore
import ForsettiRuntime

/// `forsetti-host enable`, `disable` and `select`: the operator's activation state in
/// STATE/activation.json.
enum ActivationCommands {
  static let common: [OptionSpec] = [
    .value("manifests", "DIR", "Where the module's manifest is.", default: "manifests"),
    .state("State directory."),
    .flag("json", "Print the resulting activation state as JSON instead of text."),
  ]

  static let discussion = """
    STATE/activation.json holds the modules enabled and disabled by the operator and the selected
    UI module; it is written atomically, and concurrent commands never lose one another's change.
    With no file every eligible module is enabled (under the default policy, allow), and the
    first UI or app module by module ID is selected. Only one UI or app module runs at a time;
    services are not affected by the selection. `run --default-policy deny` runs a free module
    only when it is enabled here or forced on with `forsetti-host override module ID on` (a paid
    module runs once its product is unlocked). A running host applies a change at once.

    The module must be declared by a valid manifest in --manifests.

    EXIT STATUS:
      0  the state was changed (or already was so)
      2  usage error: a bad option, a module no manifest declares, or an unreadable or malformed
         activation file
    """

  static let enableSpec = CommandSpec(
    name: "enable",
    abstract: "Enable a module so that it runs when eligible, also under --default-policy deny.",
    discussion: discussion, options: common,
    positionals: [PositionalSpec("MODULE_ID", "The module to enable.")])

  static let disableSpec = CommandSpec(
    name: "disable", abstract: "Disable a module: it does not run even when eligible.",
    discussion: discussion, options: common,
    positionals: [PositionalSpec("MODULE_ID", "The module to disable.")])

  static let selectSpec = CommandSpec(
    name: "select", abstract: "Make a UI or app module the one that runs (enables it), or --none.",
    discussion: discussion,
    options: [.flag("none", "Select no UI module: every UI and app module stops.")] + common,
    positionals: [PositionalSpec("MODULE_ID", "The ui or app module to select.", optional: true)])

  static let enableServed = served { p throws(CommandFailure) in .enable(module: p.positionals[0]) }
  static let disableServed = served { p throws(CommandFailure) in .disable(module: p.positionals[0]) }
  static let selectServed = served { p throws(CommandFailure) in
    switch (p.positionals.first, p.flag("none")) {
    case (nil, false): throw .usage(.missingArgument("MODULE_ID (or --none)"))
    case (let id?, true):
      throw .usage(.invalidValue(option: "none", value: id, why: "give a MODULE_ID or --none, not both"))
    case (nil, true): return .select(module: nil)
    case (let id?, false): return .select(module: id)
    }
  }

  static func served(
    _ command: @escaping @Sendable (ParsedArguments) throws(CommandFailure) -> ControlCommand
  )
    -> ServedVerb
  {
    ServedVerb(
      command: command, judge: { p throws(CommandFailure) in ServedVerb.files(p) },
      render: ServedVerb.typed(render))
  }

  static func enable(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    try enableServed.local(p, console)
  }

  static func disable(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    try disableServed.local(p, console)
  }

  static func select(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    try selectServed.local(p, console)
  }

  /// What was done, or the activation state (`activation.json`, the answer without `done`) as
  /// JSON.
  static func render(_ answer: ActivationAnswer, _ p: ParsedArguments, _ console: Console) -> ExitCode {
    console.out(
      p.flag("json")
        ? JSONWriter.string(answer.state.json) + "\n"
          // The host's words off a socket, naming a module ID as asked: the module-text rule.
        : "\(LogRecord.streamSafe(answer.done)); a running host applies this at once\n")
    return .success
  }
}
