import ForsettiCore
import ForsettiRuntime

/// `forsetti-host explain MODULE_ID`: the whole gate trace of one module.
enum ExplainCommand {
  static let spec = CommandSpec(
    name: "explain",
    abstract: "Show every gate step for one module: verdict, reason code and detail.",
    discussion: """
      Judges the module as `check` does (binary steps too with --plugins), then adds its state in
      the running or last host. MODULE_ID may also be a manifest file name. It says whether
      signatures are required (--require-signatures), which keys are trusted for modules, what
      the module's signature is and why it passed or failed (JSON: "signatures"), and warns of
      any key in STATE/trusted-keys/ trusted for nothing. With --plugins it says which
      directories a worker of the module may read for its own libraries (its DT_NEEDED, found
      as the dynamic loader finds them) and any it may not (JSON: "libraries").

      \(ExitCode.helpText)
      """,
    options: HostOptions.specs, positionals: [PositionalSpec("MODULE_ID", "The module to explain.")])

  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    try run(p, console: console, health: .unknown)
  }

  /// `explain` with the health the module reported, as the running host answering knows it.
  static func run(_ p: ParsedArguments, console: Console, health: ReportedHealth) throws(CommandFailure)
    -> ExitCode
  {
    let options = try HostOptions.parse(p)
    let wanted = p.positionals[0]
    let verdicts = try options.verdicts(laterSteps: "explain does not load modules")
    let judgements = verdicts.judgements
    guard
      let j = judgements.first(where: { $0.moduleID == wanted })
        ?? judgements.first(where: { $0.file == wanted })
    else {
      let known = judgements.compactMap(\.moduleID)
      let hint = Suggestion.closest(to: wanted, among: known).map { "; did you mean '\($0)'?" } ?? ""
      throw .configuration(
        .file(
          option: "manifests", path: options.manifestsDirectory,
          reason: "no manifest declares module \(wanted)\(hint)"))
    }
    let last = try LastRun.read(stateDirectory: options.stateDirectory)
    let runState = j.moduleID.flatMap { last?.states[$0] }
    let trust = try TrustReport.make(j.manifest, options: options)
    let signatures = SignatureStepReport.make(j.manifest, index: verdicts.index, options: options)
    let libraries = LibraryGrantReport.make(j.manifest, index: verdicts.index, options: options)
    if options.json {
      guard case .object(var o) = TraceJSON.judgement(j) else { return .blocked }
      o["entitlement"] = trust?.entitlementJSON ?? .null
      o["approval"] = trust?.approvalJSON ?? .null
      o["licences"] = .strings(trust?.licences ?? [])
      o["signatures"] = signatures.json
      o["runState"] = .string(orNull: runState?.state)
      o["runReason"] = .string(orNull: runState?.reason)
      o["isolation"] = .string(IsolationSettings.kernelSupport())
      o["libraries"] = libraries?.json ?? .null
      o["health"] = health.json(j.moduleID)
      health.annotate(&o)
      console.out(JSONWriter.string(.object(o), pretty: true) + "\n")
    } else {
      var out =
        "\(j.moduleID ?? "-") (\(j.file)): \(j.passed ? "passes every gate evaluated" : "BLOCKED by \(j.reason?.rawValue ?? "?")")\n"
      for e in j.trace.entries {
        let verdict = e.verdict.rawValue.uppercased().padded(to: 7)
        let step = e.step.rawValue.padded(to: 19)
        out +=
          "  \(verdict) \(step) \(e.reason.map { "\($0.rawValue): " } ?? "")\(LogRecord.streamSafe(e.detail))\n"
      }
      if let trust { out += trust.text }
      out += signatures.text
      out += "  isolation available here: \(IsolationSettings.kernelSupport())\n"
      if let libraries { out += libraries.text }
      if let last, let runState {
        // runtime.json is a file: whatever it holds is shown by the module-text rule.
        out +=
          "  in the \(last.label): \(LogRecord.streamSafe(runState.state + (runState.reason.map { " (\($0))" } ?? "")))\n"
      }
      out += health.text(j.moduleID)
      console.out(out)
    }
    return j.passed ? .success : .blocked
  }
}
