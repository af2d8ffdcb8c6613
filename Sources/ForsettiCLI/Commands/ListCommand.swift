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
    let root = answer.objectValue ?? JSONObject()
    let modules = (root["modules"]?.arrayValue ?? []).compactMap(\.objectValue)
    let passed = modules.allSatisfy { $0["verdict"]?.stringValue == "pass" }
    if p.flag("json") {
      ServedVerb.printJSON(answer, console)
      return passed ? .success : .blocked
    }
    let host = root["host"]?.objectValue
    let pid = host?["pid"]?.integerValue.flatMap(Int32.init(exactly:))
    let running = host?["running"]?.boolValue ?? false
    let health = ReportedHealth(root)
    var rows: [[String]] = [
      [
        "MODULE", "VERSION", "TYPE", "GATES", pid == nil ? "RUN" : running ? "RUNNING HOST" : "LAST RUN",
        "HEALTH",
      ]
    ]
    for m in modules {
      let id = m["moduleID"]?.stringValue
      var gate =
        m["verdict"]?.stringValue == "pass" ? "pass" : "blocked: \(m["reason"]?.stringValue ?? "?")"
      // The override that decided the entitlement (a running host's in-memory one included).
      if let o = m["override"]?.objectValue, let summary = o["summary"]?.stringValue {
        gate += " (\(summary))"
      }
      let run =
        m["runState"]?.stringValue.map { s in
          LogRecord.streamSafe(m["runReason"]?.stringValue.map { "\(s) (\($0))" } ?? s)
        } ?? "-"
      rows.append([
        id ?? m["file"]?.stringValue ?? "-", m["version"]?.stringValue ?? "-", m["type"]?.stringValue ?? "-",
        gate, run, health.cell(m["health"]),
      ])
    }
    console.out(Columns.render(rows))
    if let pid { console.out("run state from the \(RunStates.label(pid: pid, running: running))\n") }
    console.out(health.listFooter)
    return passed ? .success : .blocked
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
