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

  static let served = ServedVerb(
    command: { p throws(CommandFailure) in .reload(module: p.positionals[0]) },
    judge: { p throws(CommandFailure) in ServedVerb.files(p) }, render: ServedVerb.typed(render))

  /// Runs only when no host answered: the answer says reload needs one.
  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    try served.local(p, console)
  }

  /// One line per module, as `dev` prints it, with the trace of what did not reload.
  static func render(_ answer: ReloadAnswer, _ p: ParsedArguments, _ console: Console) -> ExitCode {
    for r in answer.reports {
      // The host's words, but a host's answer is bytes off a socket: shown by the module-text rule.
      var out = LogRecord.streamSafe(r.line) + "\n"
      for e in r.trace {
        out +=
          "    \(e.verdict.uppercased().padded(to: 5)) \(e.step): \(e.reason.map { "\($0): " } ?? "")\(LogRecord.streamSafe(e.detail))\n"
      }
      console.out(out)
    }
    return answer.reloaded ? .success : .blocked
  }
}
