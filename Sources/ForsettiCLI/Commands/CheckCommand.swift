import ForsettiBinary
import ForsettiCore
import ForsettiRuntime

/// `forsetti-host check`: judges every manifest without loading any module code.
enum CheckCommand {
  static let spec = CommandSpec(
    name: "check",
    abstract: "Judge every manifest in a directory against the gate stack, without loading any module.",
    discussion: """
      Prints one line per module: PASS, or BLOCKED with the first blocking reason code and what
      to fix. With --json prints {"modules":[{"file","moduleID","verdict","reason","step","detail"}]},
      "step" and "detail" naming the step that blocked the module and why (null when it passed).
      With --trace, every module's whole gate trace too: each step's verdict and detail, under
      its line or as "trace" in JSON. Steps that need the module loaded (load, identity and UI,
      start) are recorded as skipped.
      With --plugins, every file there that could not be inspected (not ELF, truncated,
      malformed) is listed too ("binaryFailures" in JSON), whether or not a manifest names it.

      \(ExitCode.helpText)
      """,
    options: HostOptions.specs + [
      .flag("trace", "Also print every module's whole gate trace (each step's verdict and detail).")
    ])

  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    let options = try HostOptions.parse(p)
    let (report, judgements, badBinaries) = try options.judgeWithBinaries(
      laterSteps: "check does not load modules")
    let ignored = report.files.compactMap { f in if case .ignored = f.outcome { f.file } else { nil } }

    // The whole trace only on request: its pass lines are rendered for nothing else, and were
    // most of what `check --json` wrote and most of its time.
    let trace = p.flag("trace")
    if options.json {
      // By index: mapping a function value over the array copied every judgement first.
      let modules = judgements.indices.map { i in
        trace ? TraceJSON.judgement(judgements[i]) : TraceJSON.verdict(judgements[i])
      }
      var root = JSONObject([("modules", .array(modules))])
      root["ignored"] = .strings(ignored)
      root["binaryFailures"] = .strings(badBinaries.map(\.description))
      if let stop = report.strictFailure { root["strictStoppedAt"] = .string(stop.file) }
      console.out(JSONWriter.string(.object(root), pretty: true) + "\n")
    } else {
      console.out(
        CheckReport.text(judgements, ignored: ignored, strictStop: report.strictFailure?.file, trace: trace))
      for failure in badBinaries { console.out("not inspectable: \(failure)\n") }
    }
    let blocked = judgements.contains { !$0.passed } || report.strictFailure != nil
    return blocked ? .blocked : .success
  }
}
