import ForsettiCore
import ForsettiRuntime

/// The verbs a running host answers (`ControlRequest.verbs`): the command line asks the host on
/// the state directory first with the verb's typed request and renders its answer, and computes
/// the same answer on the files only when none runs, saying which.
enum RemoteVerbs {
  /// What every served verb's help adds.
  static let helpNote = """

    RUNNING HOST:
      When a host runs on --state, this asks it through STATE/control.sock (docs/control.md):
      it answers with its own options (--manifests, --plugins, --policy, --entitlements,
      --approve-all, --host-version, --require-signatures: any given here are not used) and its
      live state, and applies a change at once. Standard error says whether a host answered or
      the files were used. The socket is used only if root or you listen on it, as the pid
      STATE/host.lock names; a host busy with other clients is asked again for up to 10 s.
        4  a host runs but gave no answer: it stopped or died mid-request (the change may or
           may not have been applied), stayed busy, or took longer than 60 s
        5  STATE/control.sock is not the host's (another user, or another pid); nothing was sent

    """

  /// Whether a running host answers `verb`.
  static func served(_ verb: String) -> Bool { ControlRequest.verbs.contains(verb) }

  /// Verbs that write the state directory: with no host they say so.
  static let writing = Set(ControlVerb.all.filter(\.writes).map(\.name))

  /// Asks the host running on the state directory of `p`. nil: none runs (compute the answer on
  /// the files); otherwise the exit status, its answer rendered.
  static func ask(_ verb: String, _ p: ParsedArguments, spec: CommandSpec, console: Console)
    throws(CommandFailure)
    -> Int32?
  {
    guard let served = ServedVerb.named(verb) else { return nil }
    do { try ArgumentParser.checkPositionals(p, for: spec) } catch { throw .usage(error) }
    let command = try served.command(p)
    let state = p.stateDirectory
    switch ControlClient.ask(ControlRequest(command), stateDirectory: state) {
    case .answered(let r):
      console.err("forsetti-host: answered by the host running on \(state) (pid \(r.pid))\n")
      switch r.outcome {
      case .failed(let f): throw .control(f)
      case .answered(let answer, let changes):
        let status = served.render(answer, p, console)
        // After the answer, or on standard error when it is JSON, so standard output stays
        // one document.
        for c in changes {
          let line = "host: \(c.moduleID) is now \(c.state)\n"
          p.flag("json") ? console.err(line) : console.out(line)
        }
        return status.rawValue
      }
    case .noHost:
      return nil
    case .failed(let e):
      console.err("forsetti-host: error: \(e)\n")
      return exitCode(e).rawValue
    }
  }

  /// What a client's failure to be answered exits with.
  static func exitCode(_ e: ControlError) -> ExitCode {
    switch e {
    case .hostGone, .busy, .timedOut: .noAnswer
    case .untrustedListener, .notTheHost: .untrustedSocket
    case .malformed, .field, .version, .unknownVerb, .refused, .unreachable: .usage
    }
  }

  /// The note after a verb ran on the files because no host runs.
  static func noHost(_ verb: String, _ p: ParsedArguments) -> String {
    let state = p.stateDirectory
    let writes = writing.contains(verb) && p.positionals.first != "list"
    return
      "forsetti-host: no host is running on \(state); \(writes ? "wrote the files" : "read from the files")\n"
  }
}
