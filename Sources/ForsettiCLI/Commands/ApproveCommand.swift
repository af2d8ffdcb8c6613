import ForsettiCore
import ForsettiRuntime

/// `forsetti-host approve` and `revoke`: the user's decisions in STATE/approvals.json.
enum ApproveCommand {
  static let options: [OptionSpec] = [
    .value("capabilities", "CAP,CAP…", "Only these capabilities (default: all the manifest requests)."),
    .value("manifests", "DIR", "Where the module's manifest is.", default: "manifests"),
    .state("State directory."),
    .flag("json", "Print JSON instead of text."),
  ]

  static let approveSpec = CommandSpec(
    name: "approve", abstract: "Approve the capabilities a module requests (all, or --capabilities).",
    discussion:
      "Writes STATE/approvals.json atomically. An update that adds capabilities needs this again for the added ones.",
    options: options, positionals: [PositionalSpec("MODULE_ID", "The module to approve.")])

  static let revokeSpec = CommandSpec(
    name: "revoke", abstract: "Withdraw approval of a module's capabilities (all, or --capabilities).",
    options: options, positionals: [PositionalSpec("MODULE_ID", "The module.")])

  static func capabilities(_ p: ParsedArguments) throws(CommandFailure) -> Set<Capability>? {
    guard let raw = p.value("capabilities") else { return nil }
    var out = Set<Capability>()
    for name in raw.split(separator: ",").map(String.init) {
      guard let c = Capability(rawValue: name) else {
        let hint =
          Suggestion.closest(to: name, among: Capability.allCases.map(\.rawValue)).map {
            "; did you mean '\($0)'?"
          } ?? ""
        throw .usage(
          .invalidValue(option: "capabilities", value: raw, why: "unknown capability '\(name)'\(hint)"))
      }
      out.insert(c)
    }
    return out
  }

  static let approveServed = ServedVerb(
    command: { p throws(CommandFailure) in
      .approve(module: p.positionals[0], capabilities: try capabilities(p).map { $0.sorted() })
    },
    judge: { p throws(CommandFailure) in ServedVerb.files(p) },
    render: ServedVerb.typed { a, p, console in render(a, p, console, now: "") })

  static let revokeServed = ServedVerb(
    command: { p throws(CommandFailure) in
      .revoke(module: p.positionals[0], capabilities: try capabilities(p).map { $0.sorted() })
    },
    judge: { p throws(CommandFailure) in ServedVerb.files(p) },
    render: ServedVerb.typed { a, p, console in render(a, p, console, now: " now") })

  static func approve(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    try approveServed.local(p, console)
  }

  static func revoke(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    try revokeServed.local(p, console)
  }

  /// `approved for ID: CAP, CAP` (`now` after a revoke), or the answer as JSON.
  static func render(_ answer: ApprovalAnswer, _ p: ParsedArguments, _ console: Console, now: String)
    -> ExitCode
  {
    if p.flag("json") {
      console.out(JSONWriter.string(answer.json) + "\n")
      return .success
    }
    let caps = answer.approved.map(\.rawValue)
    console.out(
      "approved for \(LogRecord.streamSafe(answer.moduleID))\(now): \(caps.isEmpty ? "nothing" : caps.joined(separator: ", "))\n"
    )
    return .success
  }
}
