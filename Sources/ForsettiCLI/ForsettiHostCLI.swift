import ForsettiCore
import ForsettiHost
import Glibc

/// The `forsetti-host` command line: dispatches to a verb and turns failures into one clear
/// line, a hint and an exit status.
public enum ForsettiHostCLI {
  public static let program = "forsetti-host"

  struct Verb: Sendable {
    var spec: CommandSpec
    var run: @Sendable (ParsedArguments, Console) throws(CommandFailure) -> ExitCode
    /// What the verb checks of its options before it does anything, for `--print-config`.
    var check: (@Sendable (ParsedArguments) throws(CommandFailure) -> Void)? = nil

    /// Runs the verb on `p` if it may be: its help when asked for, a usage error when a
    /// positional it requires is missing. The one way in, from the command line and the
    /// control socket alike, so no verb indexes a positional that is not there.
    func call(
      _ p: ParsedArguments, _ console: Console,
      as run: (ParsedArguments, Console) throws(CommandFailure) -> ExitCode
    ) throws(CommandFailure) -> ExitCode {
      if p.helpRequested {
        console.out(ForsettiHostCLI.help(spec))
        return .success
      }
      do { try ArgumentParser.checkPositionals(p, for: spec) } catch { throw .usage(error) }
      return try run(p, console)
    }

    func call(_ p: ParsedArguments, _ console: Console) throws(CommandFailure) -> ExitCode {
      try call(p, console, as: run)
    }
  }

  static let verbs: [Verb] = [
    Verb(spec: CheckCommand.spec, run: CheckCommand.run),
    Verb(spec: RunCommand.spec, run: RunCommand.run, check: RunCommand.check),
    Verb(spec: DevCommand.spec, run: DevCommand.run, check: DevCommand.check),
    Verb(spec: ListCommand.spec, run: ListCommand.run),
    Verb(spec: ExplainCommand.spec, run: ExplainCommand.run),
    Verb(spec: InspectCommand.spec, run: InspectCommand.run),
    Verb(spec: CrashesCommand.spec, run: CrashesCommand.run),
    Verb(spec: LintCommand.spec, run: LintCommand.run),
    Verb(spec: NewCommand.spec, run: NewCommand.run),
    Verb(spec: PackCommand.spec, run: PackCommand.run),
    Verb(spec: SurfaceCommand.spec, run: SurfaceCommand.run),
    Verb(spec: ApproveCommand.approveSpec, run: ApproveCommand.approve),
    Verb(spec: ApproveCommand.revokeSpec, run: ApproveCommand.revoke),
    Verb(spec: OverrideCommand.spec, run: OverrideCommand.run),
    Verb(spec: StatusCommand.spec, run: StatusCommand.run),
    Verb(spec: ReloadCommand.spec, run: ReloadCommand.run),
    Verb(spec: UpgradeCommand.spec, run: UpgradeCommand.run),
    Verb(spec: ActivationCommands.enableSpec, run: ActivationCommands.enable),
    Verb(spec: ActivationCommands.disableSpec, run: ActivationCommands.disable),
    Verb(spec: ActivationCommands.selectSpec, run: ActivationCommands.select),
    Verb(spec: KeyCommands.keygenSpec, run: KeyCommands.keygen),
    Verb(spec: KeyCommands.signSpec, run: KeyCommands.sign),
    Verb(spec: KeyCommands.verifySpec, run: KeyCommands.verify),
    Verb(spec: KeyCommands.licenceSpec, run: KeyCommands.licence),
    Verb(spec: TrustCommand.spec, run: TrustCommand.run),
  ]

  /// What the program is; the first line of `--help` and the manual's NAME line.
  static let summary = "a plugin host that judges binary modules before any of their code runs"

  /// What holds for every verb; shown by `--help` and the overview manual page.
  static let discussion = """
    \(ControlVerb.all.dropLast().map(\.name).joined(separator: ", ")) and \(ControlVerb.all.last?.name ?? "")
    ask the host running on --state first (STATE/control.sock), and use the files only when none
    runs.
    """

  /// The options given instead of a verb. `-h`/`--help` is implied, as for every verb.
  static let options: [OptionSpec] = [
    .flag("version", "Print the host version, the module ABI, the worker protocol and the build-id."),
    .flag("json", "With --version: print the same facts as a JSON object."),
    .value(
      "generate-completion-script", CompletionShell.allCases.map(\.rawValue).joined(separator: "|"),
      "Print the completion script for this shell."),
    .optionalValue(
      "generate-manual", "DIR",
      "Write \(program).1 and \(program)-COMMAND.1 for every command into DIR and print their paths; without DIR, print \(program).1."
    ),
  ]

  /// The whole command line, as completions and manual pages are generated from it.
  static var programSpec: ProgramSpec {
    var commands = verbs.map(\.spec)
    commands.append(
      CommandSpec(
        name: ProgramSpec.helpCommand, abstract: "Show help for a command.",
        positionals: [PositionalSpec("COMMAND", "The command to describe.", optional: true)]))
    return ProgramSpec(
      name: program, version: ForsettiVersion.current.description, summary: summary, discussion: discussion,
      options: options, commands: commands)
  }

  static var overview: String {
    var out = """
      \(program) \(ForsettiVersion.current): \(summary).

      USAGE: \(program) <command> [options]
             \(program) --version [--json]
             \(program) --generate-completion-script SHELL | --generate-manual [DIR]

      COMMANDS:

      """
    for v in verbs { out += CommandSpec.row(v.spec.name, v.spec.abstract) }
    out += CommandSpec.row("help [COMMAND]", "Show help for a command.")
    out += "\nOPTIONS:\n"
    out += CommandSpec.row("-h, --help", "Show this help.")
    for o in options { out += CommandSpec.row(o.usage, o.help) }
    out += "\n\(discussion)\n\nSee '\(program) <command> --help' for a command's options.\n"
    return out
  }

  /// Runs `forsetti-host` with `args` (without the program name); returns the exit status.
  public static func main(_ args: [String], console: Console = .standard) -> Int32 {
    guard let first = args.first else {
      console.out(overview)
      return ExitCode.success.rawValue
    }
    switch first {
    case UpgradeCommand.preflightVerb:
      return UpgradeCommand.preflight(console: console).rawValue
    case "-h", "--help":
      console.out(overview)
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
    if first.hasPrefix("-") {
      do throws(CommandFailure) {
        return try topLevel(TopLevelRequest.parse(args, options: options, program: program), console: console)
          .rawValue
      } catch {
        return fail(error, command: nil, console: console)
      }
    }
    guard let verb = verbs.first(where: { $0.spec.name == first }) else {
      return fail(.usage(unknownCommand(first)), command: nil, console: console)
    }
    do throws(CommandFailure) {
      let parsed: ParsedArguments
      do { parsed = try ArgumentParser.parse(Array(args.dropFirst()), for: verb.spec) } catch {
        throw .usage(error)
      }
      if parsed.helpRequested { return try verb.call(parsed, console).rawValue }
      if verb.spec.options.contains(where: { $0.name == "config" }) {
        return try configured(verb, parsed, console: console).rawValue
      }
      // A running host on the state directory answers for itself; with none, the files do.
      // A verb only a host answers (`upgrade`) has no answer on the files, and asks itself.
      guard RemoteVerbs.served(verb.spec.name), ControlVerb.named(verb.spec.name)?.onlyAHost != true else {
        return try verb.call(parsed, console).rawValue
      }
      if let status = try RemoteVerbs.ask(verb.spec.name, parsed, spec: verb.spec, console: console) {
        return status
      }
      let status = try verb.call(parsed, console).rawValue
      if verb.spec.name != "status" { console.err(RemoteVerbs.noHost(verb.spec.name, parsed)) }
      return status
    } catch {
      return fail(error, command: verb.spec.name, console: console)
    }
  }

  /// Runs a verb that reads a configuration file (`run`, `dev`) on its command line merged
  /// with the file, or prints the merged options for `--print-config`. A bad value the file
  /// gave is reported at the file's line.
  static func configured(_ verb: Verb, _ p: ParsedArguments, console: Console) throws(CommandFailure)
    -> ExitCode
  {
    let file: ConfigFile?
    do { file = try ConfigSource.load(p, spec: verb.spec, environment: environment()) } catch {
      throw .usage(.configFile(error))
    }
    let c = ConfiguredArguments.merge(p, file: file, spec: verb.spec)
    if c.arguments.flag("print-config") {
      console.out(
        c.arguments.flag("json")
          ? ConfigPrinter.json(c, spec: verb.spec) : ConfigPrinter.text(c, spec: verb.spec, program: program))
      // Checked after printing: what is wrong is then seen beside where each option came from.
      do { try verb.check?(c.arguments) } catch { throw c.attribute(error) }
      return .success
    }
    do { return try verb.call(c.arguments, console) } catch { throw c.attribute(error) }
  }

  /// The one variable read here, `ConfigSource.environmentVariable`, when set.
  static func environment() -> [String: String] {
    let name = ConfigSource.environmentVariable
    guard let raw = getenv(name) else { return [:] }
    return [name: String(cString: raw)]
  }

  /// Does what a top-level option asks: a version, a completion script, the manual pages.
  static func topLevel(_ request: TopLevelRequest, console: Console) throws(CommandFailure) -> ExitCode {
    switch request {
    case .help:
      console.out(overview)
    case .version(let json):
      let identity = BuildIdentity.current()
      console.out(
        json
          ? JSONWriter.string(identity.json(program: program), pretty: true) + "\n"
          : identity.line(program: program) + "\n")
    case .completionScript(let shell):
      console.out(shell.script(for: programSpec))
    case .manual(nil):
      console.out(ManualPage.overview(programSpec).text)
    case .manual(let directory?):
      for path in try ManualDirectory.write(ManualPage.all(programSpec), into: directory) {
        console.out(path + "\n")
      }
    }
    return .success
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
    case .several(let all):
      // Every error first, then one hint: the same exit status as any one of them.
      var usage = false
      for f in all {
        switch f {
        case .usage(let e):
          usage = true
          console.err("\(program): error: \(e)\n")
        case .configuration(let e): console.err("\(program): error: \(e)\n")
        case .control(let c): console.err("\(program): error: \(FailureFields.message(c))\n")
        case .several: _ = fail(f, command: nil, console: console)
        }
      }
      if usage {
        console.err("hint: see '\(command.map { "\(program) \($0) --help" } ?? "\(program) --help")'\n")
      }
    case .usage(let e):
      console.err("\(program): error: \(e)\n")
      let help = command.map { "\(program) \($0) --help" } ?? "\(program) --help"
      console.err("hint: see '\(help)'\n")
    case .configuration(let e):
      console.err("\(program): error: \(e)\n")
    case .control(let f):
      console.err("\(program): error: \(FailureFields.message(f))\n")
      if f.code == .usage {
        console.err("hint: see '\(command.map { "\(program) \($0) --help" } ?? "\(program) --help")'\n")
      }
      return f.code == .timedOut ? ExitCode.noAnswer.rawValue : ExitCode.usage.rawValue
    }
    return ExitCode.usage.rawValue
  }
}
