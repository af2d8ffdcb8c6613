import ForsettiCore

/// The `forsetti-host` command line: dispatches to a verb and turns failures into one clear
/// line, a hint and an exit status.
public enum ForsettiHostCLI {
  public static let program = "forsetti-host"

  struct Verb: Sendable {
    var spec: CommandSpec
    var run: @Sendable (ParsedArguments, Console) throws(CommandFailure) -> ExitCode
  }

  static let verbs: [Verb] = [
    Verb(spec: CheckCommand.spec, run: CheckCommand.run),
    Verb(spec: RunCommand.spec, run: RunCommand.run),
    Verb(spec: DevCommand.spec, run: DevCommand.run),
    Verb(spec: ListCommand.spec, run: ListCommand.run),
    Verb(spec: ExplainCommand.spec, run: ExplainCommand.run),
    Verb(spec: InspectCommand.spec, run: InspectCommand.run),
    Verb(spec: LintCommand.spec, run: LintCommand.run),
    Verb(spec: NewCommand.spec, run: NewCommand.run),
    Verb(spec: SurfaceCommand.spec, run: SurfaceCommand.run),
    Verb(spec: ApproveCommand.approveSpec, run: ApproveCommand.approve),
    Verb(spec: ApproveCommand.revokeSpec, run: ApproveCommand.revoke),
    Verb(spec: OverrideCommand.spec, run: OverrideCommand.run),
    Verb(spec: StatusCommand.spec, run: StatusCommand.run),
    Verb(spec: ReloadCommand.spec, run: ReloadCommand.run),
    Verb(spec: ActivationCommands.enableSpec, run: ActivationCommands.enable),
    Verb(spec: ActivationCommands.disableSpec, run: ActivationCommands.disable),
    Verb(spec: ActivationCommands.selectSpec, run: ActivationCommands.select),
    Verb(spec: KeyCommands.keygenSpec, run: KeyCommands.keygen),
    Verb(spec: KeyCommands.signSpec, run: KeyCommands.sign),
    Verb(spec: KeyCommands.verifySpec, run: KeyCommands.verify),
    Verb(spec: KeyCommands.licenceSpec, run: KeyCommands.licence),
    Verb(spec: TrustCommand.spec, run: TrustCommand.run),
  ]

  static var overview: String {
    var out = """
      forsetti-host \(ForsettiVersion.current): a plugin host that judges binary modules before any of their code runs.

      USAGE: \(program) <command> [options]

      COMMANDS:

      """
    for v in verbs { out += CommandSpec.row(v.spec.name, v.spec.abstract) }
    out += CommandSpec.row("help [COMMAND]", "Show help for a command.")
    out += """

      OPTIONS:
        -h, --help                Show this help.
        --version                 Print the host version.

      status, list, explain, surface, approve, revoke, override, enable, disable, select and reload
      ask the host running on --state first (STATE/control.sock), and use the files only when none
      runs.

      See '\(program) <command> --help' for a command's options.

      """
    return out
  }

  /// Runs `forsetti-host` with `args` (without the program name); returns the exit status.
  public static func main(_ args: [String], console: Console = .standard) -> Int32 {
    guard let first = args.first else {
      console.out(overview)
      return ExitCode.success.rawValue
    }
    switch first {
    case "-h", "--help":
      console.out(overview)
      return ExitCode.success.rawValue
    case "--version":
      console.out("\(ForsettiVersion.current)\n")
      return ExitCode.success.rawValue
    case "help":
      guard args.count > 1 else {
        console.out(overview)
        return ExitCode.success.rawValue
      }
      guard let verb = verbs.first(where: { $0.spec.name == args[1] }) else {
        return fail(.usage(unknownCommand(args[1])), command: nil, console: console)
      }
      console.out(help(verb.spec))
      return ExitCode.success.rawValue
    default:
      break
    }
    guard let verb = verbs.first(where: { $0.spec.name == first }) else {
      return fail(.usage(unknownCommand(first)), command: nil, console: console)
    }
    do throws(CommandFailure) {
      let parsed: ParsedArguments
      do { parsed = try ArgumentParser.parse(Array(args.dropFirst()), for: verb.spec) } catch {
        throw .usage(error)
      }
      if parsed.helpRequested {
        console.out(help(verb.spec))
        return ExitCode.success.rawValue
      }
      // A running host on the state directory answers for itself; with none, the files do.
      guard RemoteVerbs.served(verb.spec.name) else { return try verb.run(parsed, console).rawValue }
      if let status = RemoteVerbs.ask(verb.spec.name, parsed, spec: verb.spec, console: console) {
        return status
      }
      let status = try verb.run(parsed, console).rawValue
      if verb.spec.name != "status" { console.err(RemoteVerbs.noHost(verb.spec.name, parsed)) }
      return status
    } catch {
      return fail(error, command: verb.spec.name, console: console)
    }
  }

  /// A verb's help, with what a running host changes for the verbs it answers.
  static func help(_ spec: CommandSpec) -> String {
    spec.helpText(program: program) + (RemoteVerbs.served(spec.name) ? RemoteVerbs.helpNote : "")
  }

  static func unknownCommand(_ name: String) -> UsageError {
    let names = verbs.map(\.spec.name) + ["help"]
    return .unknownCommand(name, suggestion: Suggestion.closest(to: name, among: names))
  }

  static func fail(_ failure: CommandFailure, command: String?, console: Console) -> Int32 {
    switch failure {
    case .usage(let e):
      console.err("\(program): error: \(e)\n")
      let help = command.map { "\(program) \($0) --help" } ?? "\(program) --help"
      console.err("hint: see '\(help)'\n")
    case .configuration(let e):
      console.err("\(program): error: \(e)\n")
    }
    return ExitCode.usage.rawValue
  }
}
