import ForsettiCore
import ForsettiRuntime

/// `forsetti-host reload ID`: the running host reloads one module now.
enum ReloadCommand {
  static let spec = CommandSpec(
    name: "reload",
    abstract: "Have the running host reload one module now, from its files as they are.",
    discussion: """
      The host on --state judges the module again, asks it for its state, stops it, loads it
      from its manifest and binary as they are now (a new version too, under `run` as under
      `dev`), starts it with that state, and rolls back to the previous version if the new one
      fails or crashes within the grace period (0.5 s, or dev's --grace). Consumers of its role
      restart after it. Prints one line, as `dev` does.

      EXIT STATUS:
        0  reloaded (or started, if it was not running)
        1  refused by a gate, or rolled back
        2  usage error, no such module, or no host running on --state
      """,
    options: [.state("State directory.")],
    positionals: [PositionalSpec("MODULE_ID", "The module to reload.")])

  /// Runs only when no host answered.
  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    let state = p.stateDirectory
    throw .configuration(
      .directory(
        option: "state", path: state, reason: "no host is running on it; reload needs a running host"))
  }
}
