import ForsettiCore
import ForsettiRuntime

/// `forsetti-host list`: every module, its gate verdict now, and its state in the running (or
/// last) host; the answer is `VerdictAnswers.list`, the running host's own when one answers.
enum ListCommand {
  static let spec = CommandSpec(
    name: "list",
    abstract: "List modules: the gate verdict now, and their state in the running (or last) host.",
    discussion: "\(ExitCode.helpText)",
    options: HostOptions.specs)

  static let served = ServedVerb(
    command: { _ throws(CommandFailure) in .list }, judge: ServedVerb.options, render: render)

  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    try served.local(p, console)
  }

  /// The answer as `--json` prints it, or as the table.
  static func render(_ answer: JSONValue, _ p: ParsedArguments, _ console: Console) -> ExitCode {
    let list: ListAnswer
    switch ListAnswer.decode(answer) {
    case .success(let decoded): list = decoded
    case .failure(let e):
      console.err("forsetti-host: error: \(e)\n")
      return .usage
    }
    if p.flag("json") {
      ServedVerb.printJSON(answer, console)
      return list.allPass ? .success : .blocked
    }
    for problem in list.problems { console.err("forsetti-host: warning: \(problem)\n") }
    let health = ReportedHealth(known: list.healthKnown)
    let run = list.host.map { $0.running ? "RUNNING HOST" : "LAST RUN" } ?? "RUN"
    var rows: [[String]] = [["MODULE", "VERSION", "TYPE", "GATES", run, "HEALTH"]]
    for m in list.modules {
      var gate = m.passed ? "pass" : "blocked: \(m.reason ?? "?")"
      // The override that decided the entitlement (a running host's in-memory one included).
      if let o = m.override { gate += " (\(o.summary))" }
      let state = m.runState.map { s in LogRecord.streamSafe(m.runReason.map { "\(s) (\($0))" } ?? s) } ?? "-"
      rows.append([
        m.moduleID ?? ModuleText.visible(m.file),
        m.runningVersion.map { "\($0) (\(m.version ?? "-") on disk: reload pending)" } ?? m.version ?? "-",
        m.type ?? "-", gate, state, health.cell(m.health),
      ])
    }
    console.out(Columns.render(rows))
    if let host = list.host { console.out("run state from the \(host.label)\n") }
    console.out(health.listFooter)
    return list.allPass ? .success : .blocked
  }
}

/// Left-aligned columns separated by two spaces.
enum Columns {
  static func render(_ rows: [[String]]) -> String {
    let n = rows.map(\.count).max() ?? 0
    var widths = [Int](repeating: 0, count: n)
    for r in rows { for (i, c) in r.enumerated() { widths[i] = max(widths[i], c.count) } }
    return rows.map { r in
      r.enumerated().map { i, c in
        i == r.count - 1 ? c : c.padded(to: widths[i])
      }
      .joined(separator: "  ")
    }.joined(separator: "\n") + "\n"
  }
}
