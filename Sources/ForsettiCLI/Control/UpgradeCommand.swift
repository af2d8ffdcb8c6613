import ForsettiCore
import ForsettiRuntime
import Glibc

/// `forsetti-host upgrade`: the running host becomes the executable now at its path, in the
/// same process (`HostUpgrade`); then this waits until the new image answers `status` with the
/// upgrade's token. And `upgrade-preflight`, not listed: what the new executable is run as,
/// before the host gives anything up, to say it can read the host's handover.
enum UpgradeCommand {
  static let spec = CommandSpec(
    name: "upgrade",
    abstract: "Have the running host become the executable now at its path, without a restart.",
    discussion: """
      The host on --state runs the executable at its path (a package upgrade replaced it) to
      check it can take this host over, then becomes it in the same process: the same pid, the
      same state directory, lock and control socket; a request made meanwhile waits and is
      answered by the new image. A new executable that cannot (it exits, hangs, or reads
      another handover), or that refuses the host's options (run as the host would be, with
      --print-config), is refused, and the host goes on as it was. The new image reads host.conf
      again and starts --for's count again.

      Every running module is kept running in the same worker (its calls made meanwhile are
      answered by the new image); one the new version's rules no longer start, or start with
      another grant or binary, is stopped then, saying why. In-memory overrides are kept.
      Refused with modules in the host's process (--in-process), or with the debug page (--ui):
      a new image would not keep them.

      EXIT STATUS:
        0  upgraded: the new image answers
        1  refused or failed before the handover: the host goes on as it was (why is said)
        2  usage error, or no host running on --state
        4  the host gave no answer (busy: another upgrade, or other clients), or the new image
           did not come up (the host is gone)
        5  STATE/control.sock is not the host's; nothing was sent
      """,
    options: [.state("State directory."), .flag("json", "Print the upgrade's answer as JSON.")])

  /// How long the new image may take to answer `status`.
  static let comeUpWithin = 60.0

  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    let state = p.stateDirectory
    let answer: UpgradeAnswer
    // Not asked again when busy: a second `upgrade` retried until the new image answered it
    // would upgrade that one too.
    switch ControlClient.ask(ControlRequest(.upgrade), stateDirectory: state, busyRetry: 0) {
    case .noHost:
      throw .control(
        ControlFailure(
          .failed, "no host is running on it; upgrade needs a running host", field: .stateDirectory,
          value: state))
    case .failed(let e):
      console.err("forsetti-host: error: \(e)\n")
      return RemoteVerbs.exitCode(e)
    case .answered(let r):
      switch r.outcome {
      case .failed(let f) where f.code == .usage: throw .control(f)
      case .failed(let f):
        // Refused or failed before anything was given up: the host goes on as it was.
        console.err("forsetti-host: \(FailureFields.message(f))\n")
        return .blocked
      case .answered(let document, _):
        switch UpgradeAnswer.decode(document) {
        case .failure(let e):
          // It may be handing over already: what comes of it is not known here.
          console.err("forsetti-host: error: \(e); see `status --json` (image) for what came of it\n")
          return .noAnswer
        case .success(let a): answer = a
        }
      }
    }
    console.err(
      "forsetti-host: \(LogRecord.streamSafe(answer.executable)) (version \(LogRecord.streamSafe(answer.toVersion))) passed its preflight; the host hands over to it\n"
    )
    let end = ContinuousClock.now + .seconds(Int64(comeUpWithin))
    while ContinuousClock.now < end {
      switch ControlClient.ask(ControlRequest(.status), stateDirectory: state) {
      case .noHost:
        console.err("forsetti-host: error: the host is gone: the new image did not come up\n")
        return .noAnswer
      case .failed(.hostGone):
        // The exec closed the connection mid-answer: the new image answers the next one.
        usleep(20_000)
      case .failed(let e):
        console.err("forsetti-host: error: \(e)\n")
        return RemoteVerbs.exitCode(e)
      case .answered(let r):
        guard case .answered(let document, _) = r.outcome,
          case .success(let s) = StatusAnswer.decode(document),
          let image = s.image
        else {
          usleep(20_000)
          continue
        }
        if image.upgradeToken == answer.token {
          if p.flag("json") {
            console.out(JSONWriter.string(answer.json) + "\n")
          } else {
            console.out(
              "upgraded: pid \(s.pid ?? 0) now runs \(LogRecord.streamSafe(answer.executable)), version \(LogRecord.streamSafe(image.version)) (was \(LogRecord.streamSafe(answer.fromVersion)))\n"
            )
          }
          return .success
        }
        if let failure = image.upgradeFailure, failure.hasPrefix(answer.token + ": ") {
          console.err(
            "forsetti-host: upgrade failed, the host goes on as it was: \(LogRecord.streamSafe(String(failure.dropFirst(answer.token.count + 2))))\n"
          )
          return .blocked
        }
        usleep(20_000)
      }
    }
    console.err("forsetti-host: error: the new image did not answer within \(Int(comeUpWithin)) s\n")
    return .noAnswer
  }

  /// The verb the new executable is run as by the host's preflight (not listed).
  static let preflightVerb = "upgrade-preflight"

  /// Reads the handover on the descriptor `FORSETTI_UPGRADE_FD` names and says `ready VERSION`
  /// (exit 0), or why this image cannot take the host over (exit 1).
  static func preflight(console: Console) -> ExitCode {
    guard let raw = getenv(Handover.environmentVariable), let fd = Int32(String(cString: raw)) else {
      console.err(
        "forsetti-host: \(preflightVerb) is run by a host being upgraded, with \(Handover.environmentVariable) set\n"
      )
      return .usage
    }
    do throws(Handover.Refusal) {
      _ = try Handover.read(fd: fd)
      console.out("ready \(ForsettiVersion.current)\n")
      return .success
    } catch {
      console.out("\(error)\n")
      return .blocked
    }
  }
}
