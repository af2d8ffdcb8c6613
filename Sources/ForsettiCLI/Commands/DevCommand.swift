import Dispatch
import ForsettiBinary
import ForsettiCore
import ForsettiRuntime
import FoundationEssentials
import Glibc
import Synchronization

/// `forsetti-host dev`: `run`, plus hot reload of every module whose manifest or binary changes.
enum DevCommand {
  static let spec = CommandSpec(
    name: "dev",
    abstract: "Run the modules and reload each one when its manifest or .so changes (inotify).",
    discussion: """
      A change counts when the file is complete (closed after writing, or renamed into place);
      changes within --debounce of each other make one reload. A reload gates the new version
      first, then asks the old instance for its state, stops it, loads the new version from a
      copy (a sealed memory copy with --in-process; for a worker, one under STATE/versions/, in
      the spare worker kept ready), and starts it with that state. If the new version fails any
      gate, fails to load or start, or crashes within --grace, the previous version runs again
      with its state and the failure is printed with its gate trace (a crash within --grace is
      named as such). Modules that depend on a reloaded provider restart after it. An update
      that adds capabilities is held until they are approved (in STATE/approvals.json;
      --approve-all covers only the first start), and reloaded as soon as they are; one that
      drops a capability shrinks the approval at once, so re-adding it asks again. Everything
      `run` watches is watched too.

      Exit status is as for `run`.
      """,
    options: RunCommand.spec.options + [
      .value(
        "grace", "SECONDS", "A new version that crashes this soon after start is rolled back.", default: "0.5"
      ),
      .value("debounce", "MS", "Changes closer together than this make one reload.", default: "100"),
      .flag(
        "allow-all-entitlements",
        "Treat every product as unlocked (development only; run has no such option)."),
    ])

  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    try RunCommand.host(p, console: console, development: true)
  }

  /// `dev --print-config`'s check: what `dev` would refuse before starting anything.
  static func check(_ p: ParsedArguments) throws(CommandFailure) {
    _ = try RunCommand.settings(p, development: true)
  }

  /// One reload's line, with the failing trace under it for anything but a plain reload.
  static func describe(_ r: ReloadReport) -> String {
    var out = r.line + "\n"
    if let trace = r.trace, r.outcome != .reloaded {
      for e in trace.entries where e.verdict != .skipped {
        out +=
          "    \(e.verdict.rawValue.uppercased().padded(to: 5)) \(e.step.rawValue): \(e.reason.map { "\($0.rawValue): " } ?? "")\(LogRecord.streamSafe(e.detail))\n"
      }
    }
    return out
  }
}
