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

  /// Runs only when no host answered: nothing runs.
  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    let state = p.stateDirectory
    let last = try LastRun.read(stateDirectory: state)
    if p.flag("json") {
      var o = JSONObject([("running", .bool(false)), ("state", .string(state))])
      o["lastPID"] = last.map { .number(String($0.pid)) } ?? .null
      console.out(JSONWriter.string(.object(o)) + "\n")
    } else {
      console.out(
        "not running: no host on \(state)\(last.map { " (the last one was pid \($0.pid))" } ?? "")\n")
    }
    return .notRunning
  }

  /// The running host's answer.
  static func answer(_ records: [ModuleRecord], state: String, json: Bool, pid: Int32) -> String {
    var counts: [String: Int] = [:]
    for r in records { counts[r.state.name, default: 0] += 1 }
    if json {
      let o = JSONObject([
        ("running", .bool(true)), ("pid", .number(String(pid))), ("state", .string(state)),
        ("modules", .object(JSONObject(counts.keys.sorted().map { ($0, .number(String(counts[$0] ?? 0))) }))),
      ])
      return JSONWriter.string(.object(o)) + "\n"
    }
    let started = counts["started"] ?? 0
    let others = counts.keys.sorted().filter { $0 != "started" }.map { "\(counts[$0] ?? 0) \($0)" }
    return
      "running: pid \(pid), \(started) module\(started == 1 ? "" : "s") started\(others.map { ", " + $0 }.joined()) (state directory \(state))\n"
  }
}
