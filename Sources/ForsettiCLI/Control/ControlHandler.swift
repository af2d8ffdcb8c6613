import ForsettiCore
import ForsettiRuntime
import Synchronization

/// What a running host does with a request on its control socket: the verb, run here with the
/// host's own options (so a client never repeats them), against the host's live state; a verb
/// that writes the state directory is applied at once, and the changes it made are told.
struct ControlHandler {
  let host: LiveHost
  /// The host's own options, as `run` was given them (plugins defaulted, state included).
  let hostValues: [String: [String]]
  let hostFlags: Set<String>
  let stateDirectory: String
  let pid: Int32

  func handle(_ request: ControlRequest) -> ControlResponse {
    let output = CapturedConsole()
    let status = run(request, output.console)
    let (out, err) = output.text
    return ControlResponse(status: status, stdout: out, stderr: err, pid: pid, stateDirectory: stateDirectory)
  }

  /// What a request comes to before anything of the host is touched: the verb to run with
  /// its parsed arguments, or the answer already given (an unknown verb, a usage error, a host
  /// option, or the verb's help). Total on any arguments: a request's are a client's, never
  /// trusted, and what is returned to run has every positional its verb requires.
  enum Admission {
    case run(ForsettiHostCLI.Verb, ParsedArguments)
    case answered(Int32)
  }

  static func admit(_ request: ControlRequest, _ console: Console) -> Admission {
    guard let verb = ForsettiHostCLI.verbs.first(where: { $0.spec.name == request.verb }) else {
      return .answered(
        ForsettiHostCLI.fail(
          .usage(ForsettiHostCLI.unknownCommand(request.verb)), command: nil, console: console))
    }
    let p: ParsedArguments
    do { p = try ArgumentParser.parse(request.arguments, for: verb.spec) } catch {
      return .answered(ForsettiHostCLI.fail(.usage(error), command: verb.spec.name, console: console))
    }
    // The verb's help, as the command line prints it: with -h the positionals are not checked,
    // so nothing else may run.
    if p.helpRequested {
      console.out(ForsettiHostCLI.help(verb.spec))
      return .answered(ExitCode.success.rawValue)
    }
    if let own = verb.spec.options.map(\.name).first(where: {
      RemoteVerbs.hostOptions.contains($0) && (p.values[$0] != nil || p.flag($0))
    }) {
      console.err("forsetti-host: error: --\(own): the running host uses its own; leave it out\n")
      return .answered(ExitCode.usage.rawValue)
    }
    return .run(verb, p)
  }

  private func run(_ request: ControlRequest, _ console: Console) -> Int32 {
    var p: ParsedArguments
    let verb: ForsettiHostCLI.Verb
    switch Self.admit(request, console) {
    case .answered(let status): return status
    case .run(let v, let parsed): (verb, p) = (v, parsed)
    }
    switch request.verb {
    case "status":
      console.out(
        StatusCommand.answer(host.manager.records, state: stateDirectory, json: p.flag("json"), pid: pid))
      return ExitCode.success.rawValue
    case "reload":
      guard let id = p.positionals.first else {
        return ForsettiHostCLI.fail(
          .usage(.missingArgument("MODULE_ID")), command: "reload", console: console)
      }
      return reload(id, console)
    case "override" where p.positionals.first == "list":
      return overrideList(p, console)
    case "override" where p.flag("in-memory"):
      return inMemoryOverride(p, console)
    default:
      break
    }
    for o in verb.spec.options where RemoteVerbs.hostOptions.contains(o.name) {
      if o.valueName == nil {
        if hostFlags.contains(o.name) { p.flags.insert(o.name) }
      } else if let v = hostValues[o.name] {
        p.values[o.name] = v
      }
    }
    let before = states()
    let status: Int32
    do throws(CommandFailure) {
      // Module health is only known here, in the running host: list and explain get it.
      let health = ReportedHealth.live(host.manager.environment.services.reportedHealth)
      switch request.verb {
      case "list":
        status = try verb.call(p, console) { p, c throws(CommandFailure) in
          try ListCommand.run(p, console: c, health: health)
        }.rawValue
      case "explain":
        status = try verb.call(p, console) { p, c throws(CommandFailure) in
          try ExplainCommand.run(p, console: c, health: health)
        }.rawValue
      default: status = try verb.call(p, console).rawValue
      }
    } catch {
      return ForsettiHostCLI.fail(error, command: verb.spec.name, console: console)
    }
    if RemoteVerbs.writing.contains(request.verb) {
      host.reconcile()
      tell(changes(since: before), json: p.flag("json"), console)
    }
    return status
  }

  private func given(_ p: ParsedArguments, _ name: String) -> Bool { p.values[name] != nil || p.flag(name) }

  private func reload(_ id: String, _ console: Console) -> Int32 {
    let reports: [ReloadReport]?
    do { reports = try host.reload(id) } catch {
      console.err("forsetti-host: error: \(error)\n")
      return ExitCode.usage.rawValue
    }
    guard let reports else {
      let known = host.manager.records.compactMap(\.moduleID)
      let hint = Suggestion.closest(to: id, among: known).map { "; did you mean '\($0)'?" } ?? ""
      console.err("forsetti-host: error: no manifest declares module \(id)\(hint)\n")
      return ExitCode.usage.rawValue
    }
    var ok = true
    for r in reports {
      console.out(DevCommand.describe(r))
      switch r.outcome {
      case .reloaded, .started, .restartedAfterProvider: break
      default: ok = false
      }
    }
    return ok ? ExitCode.success.rawValue : ExitCode.blocked.rawValue
  }

  /// `override list` with this host's in-memory overrides.
  private func overrideList(_ p: ParsedArguments, _ console: Console) -> Int32 {
    let store = OverrideStore(stateDirectory: stateDirectory)
    let content: OverrideStore.Content
    do { content = try store.load() } catch {
      console.err("forsetti-host: error: \(error)\n")
      return ExitCode.usage.rawValue
    }
    let memory = host.judge.configuration.inMemoryOverrides.snapshot
    console.out(
      OverrideCommand.listing(
        content: content, inMemory: memory, now: GateContext.wallClock(), json: p.flag("json")))
    return ExitCode.success.rawValue
  }

  /// `override module|product ID on|off|clear --in-memory`: held by this host until it stops.
  private func inMemoryOverride(_ p: ParsedArguments, _ console: Console) -> Int32 {
    guard p.positionals.count == 3, let channel = OverrideChannel(rawValue: p.positionals[0]),
      let state = ["on": OverrideState.on, "off": .off, "clear": .unset][p.positionals[2]]
    else {
      console.err("forsetti-host: error: expected override module|product ID on|off|clear --in-memory\n")
      return ExitCode.usage.rawValue
    }
    if let other = ["from", "until", "persisted", "windows"].first(where: { given(p, $0) }) {
      console.err("forsetti-host: error: --\(other) does not go with --in-memory\n")
      return ExitCode.usage.rawValue
    }
    let id = p.positionals[1]
    let before = states()
    host.judge.configuration.inMemoryOverrides.set(channel: channel, id: id, state: state)
    host.reconcile()
    let done =
      state == .unset
      ? "in-memory override cleared" : "forced \(state.rawValue) in memory (until this host stops)"
    console.out(
      p.flag("json")
        ? OverrideCommand.inMemoryJSON(channel: channel, id: id, state: state, done: done)
        : "\(channel.rawValue) \(id): \(done)\n")
    tell(changes(since: before), json: p.flag("json"), console)
    return ExitCode.success.rawValue
  }

  /// The module states a request changed: after the answer, or on standard error when the
  /// answer is JSON, so that standard output stays one document.
  private func tell(_ lines: [String], json: Bool, _ console: Console) {
    for line in lines { json ? console.err(line) : console.out(line) }
  }

  private func states() -> [String: ModuleState] {
    Dictionary(host.manager.records.compactMap { r in r.moduleID.map { ($0, r.state) } }) { a, _ in a }
  }

  /// One line per module whose state the request changed.
  private func changes(since before: [String: ModuleState]) -> [String] {
    host.manager.records.compactMap { r in
      guard let id = r.moduleID, before[id] != r.state else { return nil }
      return "host: \(id) is now \(r.state)\n"
    }
  }
}

/// A console whose text is kept, for an answer.
final class CapturedConsole: Sendable {
  private let out = Mutex("")
  private let err = Mutex("")

  var console: Console {
    Console(out: { s in self.out.withLock { $0 += s } }, err: { s in self.err.withLock { $0 += s } })
  }

  var text: (String, String) { (out.withLock { $0 }, err.withLock { $0 }) }
}
