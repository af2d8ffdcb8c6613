import ForsettiCore
import ForsettiRuntime

/// `forsetti-host status`: whether a host runs on the state directory, as `systemctl
/// is-active` says it (0 running, 3 not).
enum StatusCommand {
  static let spec = CommandSpec(
    name: "status",
    abstract: "Say whether a host runs on the state directory, and how its modules are (exit 0 or 3).",
    discussion: """
      Asks the host running on --state through its control socket. With no host running, says
      so, with what the last one published if anything.

      EXIT STATUS:
        0  a host is running on the state directory
        2  usage error, or the host could not be asked (another user's host)
        3  no host is running on it (as `systemctl is-active`)
      """,
    options: [
      .state("State directory."),
      .flag("json", "Print JSON instead of text."),
    ])

  static let served = ServedVerb(
    command: { _ throws(CommandFailure) in .status },
    judge: { p throws(CommandFailure) in ServedVerb.files(p) },
    render: render)

  /// Runs only when no host answered: nothing runs.
  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    try served.local(p, console)
  }

  /// The answer: a running host's pid and its modules' states, or the last host's pid.
  static func render(_ answer: JSONValue, _ p: ParsedArguments, _ console: Console) -> ExitCode {
    let status: StatusAnswer
    switch StatusAnswer.decode(answer) {
    case .success(let decoded): status = decoded
    case .failure(let e):
      console.err("forsetti-host: error: \(e)\n")
      return .usage
    }
    if p.flag("json") {
      console.out(JSONWriter.string(answer) + "\n")
      return status.running ? .success : .notRunning
    }
    let state = status.stateDirectory
    guard status.running, let pid = status.pid else {
      console.out(
        "not running: no host on \(state)\(status.lastPID.map { " (the last one was pid \($0))" } ?? "")\n")
      return .notRunning
    }
    let started = status.modules.first { $0.name == "started" }?.count ?? 0
    let others = status.modules.filter { $0.name != "started" }.map { ", \($0.count) \($0.name)" }
    console.out(
      "running: pid \(pid), \(started) module\(started == 1 ? "" : "s") started\(others.joined()) (state directory \(state))\n"
    )
    return .success
  }
}
