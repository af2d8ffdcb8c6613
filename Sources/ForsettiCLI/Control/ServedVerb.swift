import ForsettiCore
import ForsettiRuntime

/// A verb a running host answers (`ControlRequest.verbs`): the typed request its arguments make,
/// the judge the same answer is computed with when no host runs, and its one renderer, used for
/// the host's answer and the local one alike.
struct ServedVerb: Sendable {
  var command: @Sendable (ParsedArguments) throws(CommandFailure) -> ControlCommand
  /// What answers when no host runs: the verb's own options as a judge over the files.
  var judge: @Sendable (ParsedArguments) throws(CommandFailure) -> Judge
  var render: @Sendable (JSONValue, ParsedArguments, Console) -> ExitCode

  /// The answer computed on the files (no host runs), rendered as a host's would be.
  func local(_ p: ParsedArguments, _ console: Console) throws(CommandFailure) -> ExitCode {
    let command = try command(p)
    let answerer = ControlAnswerer(files: try judge(p))
    do { return render(try answerer.compute(command).json, p, console) } catch { throw .control(error) }
  }

  /// A renderer of the typed answer `A`: the document is read once, here, and a host's answer
  /// that is not an `A` is said, naming the member at fault, instead of rendered.
  static func typed<A: ControlAnswerDocument>(
    _ render: @escaping @Sendable (A, ParsedArguments, Console) -> ExitCode
  ) -> @Sendable (JSONValue, ParsedArguments, Console) -> ExitCode {
    { document, p, console in
      switch A.decode(document) {
      case .success(let answer): return render(answer, p, console)
      case .failure(let e):
        console.err("forsetti-host: error: \(e)\n")
        return .usage
      }
    }
  }

  /// A judge over the manifests (`--manifests`) and state directory only, for the verbs that
  /// take no more.
  static func files(_ p: ParsedArguments) -> Judge {
    Judge(
      HostConfiguration(
        manifestsDirectory: p.value("manifests") ?? "manifests", stateDirectory: p.stateDirectory))
  }

  /// A judge with every judging option of the verb (`list`, `explain`).
  static func options(_ p: ParsedArguments) throws(CommandFailure) -> Judge { try HostOptions.parse(p).judge }

  static func named(_ verb: String) -> ServedVerb? {
    switch verb {
    case "status": StatusCommand.served
    case "list": ListCommand.served
    case "explain": ExplainCommand.served
    case "surface": SurfaceCommand.served
    case "approve": ApproveCommand.approveServed
    case "revoke": ApproveCommand.revokeServed
    case "override": OverrideCommand.served
    case "enable": ActivationCommands.enableServed
    case "disable": ActivationCommands.disableServed
    case "select": ActivationCommands.selectServed
    case "reload": ReloadCommand.served
    default: nil
    }
  }

  /// Prints a document as every verb's `--json` does.
  static func printJSON(_ answer: JSONValue, _ console: Console) {
    console.out(JSONWriter.string(answer, pretty: true) + "\n")
  }
}
