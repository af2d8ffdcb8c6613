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

  static let served = ServedVerb(
    command: { p throws(CommandFailure) in .explain(module: p.positionals[0]) }, judge: ServedVerb.options,
    render: render)

  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    try served.local(p, console)
  }

  /// The answer as `--json` prints it, or as the trace and its sections.
  static func render(_ answer: JSONValue, _ p: ParsedArguments, _ console: Console) -> ExitCode {
    let x: ExplainAnswer
    switch ExplainAnswer.decode(answer) {
    case .success(let decoded): x = decoded
    case .failure(let e):
      console.err("forsetti-host: error: \(e)\n")
      return .usage
    }
    let v = x.verdict
    if p.flag("json") {
      ServedVerb.printJSON(answer, console)
      return v.passed ? .success : .blocked
    }
    for problem in x.problems { console.err("forsetti-host: warning: \(problem)\n") }
    var out =
      "\(v.moduleID ?? "-") (\(ModuleText.visible(v.file))): \(v.passed ? "passes every gate evaluated" : "BLOCKED by \(v.reason ?? "?")")\n"
    for e in v.trace {
      out +=
        "  \(e.verdict.uppercased().padded(to: 7)) \(e.step.padded(to: 19)) \(e.reason.map { "\($0): " } ?? "")\(LogRecord.streamSafe(e.detail))\n"
    }
    if let ent = x.entitlement.objectValue, let approval = x.approval.objectValue {
      out += trust(ent, approval, licences: x.licences)
    }
    if let s = x.signatures.objectValue { out += signatures(s) }
    out += "  isolation available here: \(x.isolation)\n"
    if let l = x.libraries.objectValue { out += libraries(l) }
    if let from = x.runFrom, let state = v.runState {
      // runtime.json is a file: whatever it holds is shown by the module-text rule.
      out += "  in the \(from): \(LogRecord.streamSafe(state + (v.runReason.map { " (\($0))" } ?? "")))\n"
    }
    if let running = v.runningVersion, let id = v.moduleID {
      out +=
        "  running version \(running); the files hold \(v.version ?? "another"): `forsetti-host reload \(id)` loads it\n"
    }
    if let s = x.serving.objectValue { out += serving(s) }
    out += ReportedHealth(known: x.healthKnown).text(v.health)
    if let crash = CrashReport(json: x.lastCrash) {
      out += "  last crash (\(CrashesCommand.when(crash.time))), kept under the state directory:\n"
      out += crash.text.split(separator: "\n").dropFirst().map { "  \($0)\n" }.joined()
    }
    console.out(out)
    return v.passed ? .success : .blocked
  }

  /// The role it serves in the running host, and the calls queued and running now.
  private static func serving(_ s: JSONObject) -> String {
    func n(_ key: String) -> String { s[key]?.integerValue.map(String.init) ?? "?" }
    return
      "  serves \(s["role"]?.stringValue ?? "?") (\(s["where"]?.stringValue ?? "?")): \(n("concurrency")) call(s) at once; now \(n("inFlight")) running, \(n("queued")) queued; \(n("busyTotal")) answered busy, \(n("timeoutsTotal")) timed out so far\n"
  }

  private static func strings(_ v: JSONValue?) -> [String] { (v?.arrayValue ?? []).compactMap(\.stringValue) }

  private static func listed(_ v: JSONValue?) -> String {
    let s = strings(v)
    return s.isEmpty ? "none" : s.joined(separator: ", ")
  }

  /// The entitlement evaluation (which override or provider decided, every provider's answer
  /// in order) and the approval state.
  private static func trust(_ e: JSONObject, _ a: JSONObject, licences: [String]) -> String {
    let unlocked = e["unlocked"]?.boolValue ?? false
    var out = "  entitlement: \(unlocked ? "UNLOCKED" : "LOCKED") — \(e["summary"]?.stringValue ?? "")\n"
    for case .object(let s) in e["steps"]?.arrayValue ?? [] {
      out +=
        "    \(s["channel"]?.stringValue ?? "?") override, \(s["provider"]?.stringValue ?? "?"): \(s["state"]?.stringValue ?? "?")\n"
    }
    out +=
      "    required product: \(e["requiredProduct"]?.stringValue ?? "none (free)"); active: \(listed(e["activeProducts"]))\n"
    for l in licences { out += "    licence \(l)\n" }
    let approved = a["approved"].flatMap { $0 == .null ? nil : listed($0) } ?? "never"
    out +=
      "  approval: requested \(listed(a["requested"])); approved \(approved); pending \(listed(a["pending"]))"
    out += a["approveAll"]?.boolValue == true ? " (--approve-all in force)\n" : "\n"
    return out
  }

  private static func signatures(_ s: JSONObject) -> String {
    let keys = (s["moduleKeys"]?.arrayValue ?? []).compactMap(\.objectValue).map {
      "\($0["keyID"]?.stringValue ?? "?") (\(PathText.name($0["file"]?.stringValue ?? "")))"
    }
    var out =
      "  signatures: \(s["setting"]?.stringValue ?? "")\n    keys trusted for modules: \(keys.isEmpty ? "none" : keys.joined(separator: ", "))\n"
    let verdict: String =
      switch s["passed"]?.boolValue {
      case nil: ""
      case true?: "passed: "
      case false?: "refused: "
      }
    out +=
      "    \(s["binary"]?.stringValue.map { "\($0): " } ?? "")\(verdict)\(LogRecord.streamSafe(s["detail"]?.stringValue ?? ""))\n"
    for w in strings(s["warnings"]) { out += "    warning: \(w)\n" }
    return out
  }

  private static func libraries(_ l: JSONObject) -> String {
    let found = (l["found"]?.arrayValue ?? []).compactMap(\.objectValue)
    var out = "  libraries (\(found.count) needed, found as the loader finds them): "
    out += LogRecord.streamSafe(l["summary"]?.stringValue ?? "") + "\n"
    for f in found {
      out +=
        "    \(LogRecord.streamSafe(f["name"]?.stringValue ?? "?")) → \(LogRecord.streamSafe(f["realPath"]?.stringValue ?? "?")) (\(f["via"]?.stringValue ?? "?"))\n"
    }
    return out
  }
}
