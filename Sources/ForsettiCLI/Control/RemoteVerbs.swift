import ForsettiCore
import ForsettiRuntime

/// The verbs a running host answers (`ControlRequest.verbs`): the command line asks the host on
/// the state directory first and runs the verb on the files only when none runs, saying which.
enum RemoteVerbs {
  /// The host's own options: a host that answers uses its own, so a client never repeats them
  /// (and cannot change them).
  static let hostOptions: Set<String> = Set(HostOptions.specs.map(\.name)).subtracting(["json"])
    .union(["default-policy"])

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
  static let writing: Set<String> = ["approve", "revoke", "override", "enable", "disable", "select"]

  /// The client's own arguments of a parsed verb, host options left out.
  static func clientArguments(_ p: ParsedArguments, spec: CommandSpec) -> [String] {
    var out: [String] = []
    for o in spec.options where !hostOptions.contains(o.name) {
      if o.valueName == nil {
        if p.flag(o.name) { out.append("--\(o.name)") }
      } else {
        for v in p.all(o.name) { out += ["--\(o.name)", v] }
      }
    }
    // After `--`, so a positional is never read as an option.
    return out + (p.positionals.isEmpty ? [] : ["--"] + p.positionals)
  }

  /// Asks the host running on the state directory of `p`. nil: none runs (run the verb on the
  /// files); otherwise the exit status, its answer printed.
  static func ask(_ verb: String, _ p: ParsedArguments, spec: CommandSpec, console: Console) -> Int32? {
    let state = p.stateDirectory
    let request = ControlRequest(verb: verb, arguments: clientArguments(p, spec: spec))
    switch ControlClient.ask(request, stateDirectory: state) {
    case .answered(let r):
      console.err("forsetti-host: answered by the host running on \(state) (pid \(r.pid))\n")
      console.out(r.stdout)
      console.err(r.stderr)
      return r.status
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
    case .malformed, .version, .unknownVerb, .refused, .unreachable: .usage
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
