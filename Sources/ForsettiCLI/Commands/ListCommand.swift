import ForsettiCore
import ForsettiRuntime

/// `forsetti-host list`: every module, its gate verdict now, and its state in the last run.
enum ListCommand {
  static let spec = CommandSpec(
    name: "list",
    abstract: "List modules: the gate verdict now, and their state in the running (or last) host.",
    discussion: "\(ExitCode.helpText)",
    options: HostOptions.specs)

  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    try run(p, console: console, health: .unknown)
  }

  /// `list` with the health modules reported, as the running host answering knows it.
  static func run(_ p: ParsedArguments, console: Console, health: ReportedHealth) throws(CommandFailure)
    -> ExitCode
  {
    let options = try HostOptions.parse(p)
    let (_, judgements) = try options.judge(laterSteps: "list does not load modules")
    let last = try LastRun.read(stateDirectory: options.stateDirectory)
    if options.json {
      var modules: [JSONValue] = []
      for j in judgements {
        let runState = j.moduleID.flatMap { last?.states[$0] }
        modules.append(
          .object(
            JSONObject([
              ("moduleID", .string(orNull: j.moduleID)), ("file", .string(j.file)),
              ("displayName", .string(orNull: j.manifest?.displayName)),
              ("version", .string(orNull: j.manifest?.moduleVersion.description)),
              ("type", .string(orNull: j.manifest?.moduleType.rawValue)),
              ("verdict", .string(j.passed ? "pass" : "blocked")),
              ("reason", .string(orNull: j.reason?.rawValue)),
              ("runState", .string(orNull: runState?.state)),
              ("runReason", .string(orNull: runState?.reason)),
              ("health", health.json(j.moduleID)),
            ])))
      }
      var root = JSONObject([("modules", .array(modules))])
      root["host"] =
        last.map {
          .object(JSONObject([("pid", .number(String($0.pid))), ("running", .bool($0.alive))]))
        } ?? .null
      health.annotate(&root)
      console.out(JSONWriter.string(.object(root), pretty: true) + "\n")
    } else {
      var rows: [[String]] = [
        [
          "MODULE", "VERSION", "TYPE", "GATES", last.map { $0.alive ? "RUNNING HOST" : "LAST RUN" } ?? "RUN",
          "HEALTH",
        ]
      ]
      for j in judgements {
        let gate = j.passed ? "pass" : "blocked: \(j.reason?.rawValue ?? "?")"
        let run =
          j.moduleID.flatMap { last?.states[$0] }.map { s in
            LogRecord.streamSafe(s.reason.map { "\(s.state) (\($0))" } ?? s.state)
          } ?? "-"
        rows.append([
          j.moduleID ?? j.file, j.manifest?.moduleVersion.description ?? "-",
          j.manifest?.moduleType.rawValue ?? "-", gate, run, health.cell(j.moduleID),
        ])
      }
      console.out(Columns.render(rows))
      if let last { console.out("run state from the \(last.label)\n") }
      console.out(health.listFooter)
    }
    return judgements.allSatisfy(\.passed) ? .success : .blocked
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
