import Dispatch
import ForsettiBinary
import ForsettiCore
import ForsettiRuntime
import Foundation
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
      copy under STATE/versions/, and starts it with that state. If the new version fails any
      gate, fails to load or start, or crashes within --grace, the previous version runs again
      with its state and the failure is printed with its gate trace. Modules that depend on a
      reloaded provider restart after it. An update that adds capabilities is not loaded until
      they are approved (in STATE/approvals.json; --approve-all covers only the first start).

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
    let grace = try number(p, "grace", 0.5)
    let debounce = try number(p, "debounce", 100) / 1000
    return try RunCommand.host(p, console: console) { options, manager, loop throws(CommandFailure) in
      let pending = PendingChanges()
      let waker = loop.waker
      let watcher: FileWatcher
      do {
        watcher = try FileWatcher(directories: [options.manifestsDirectory] + options.pluginDirectories) {
          path, at in
          pending.add(path, at: at)
          waker()
        }
      } catch {
        throw .configuration(
          .directory(option: "manifests", path: options.manifestsDirectory, reason: "\(error)"))
      }
      manager.environment.log.write(
        LogRecord(
          level: .info, moduleID: nil,
          message:
            "watching \(([options.manifestsDirectory] + options.pluginDirectories).joined(separator: ", ")) for changes"
        ))
      return RunCommand.DevHooks(
        nextDue: { pending.due(after: debounce) },
        process: { manager in
          withExtendedLifetime(watcher) {
            guard let (paths, first) = pending.take(after: debounce) else { return }
            apply(paths, since: first, options: options, manager: manager, grace: grace, console: console)
          }
        })
    }
  }

  static func apply(
    _ paths: Set<String>, since: ContinuousClock.Instant, options: HostOptions, manager: ModuleManager,
    grace: Double,
    console: Console
  ) {
    let judgements: [ModuleJudgement]
    let index: BinaryIndex
    let approvals: ApprovalLedger
    do {
      let report = try options.discover()
      let context = try options.gateContext(discovered: report.manifests)
      index = BinaryIndex.build(directories: options.pluginDirectories)
      judgements = GateStack.judge(
        report, context: context, inspect: options.inspect(index), laterSteps: nil)
      approvals = try options.storedApprovals()
    } catch {
      console.err("forsetti-host: reload skipped: \(error)\n")
      return
    }
    for r in manager.reload(
      judgements: judgements, index: index, changed: paths, approvals: approvals, grace: grace, since: since)
    {
      var out = r.line + "\n"
      if let trace = r.trace, r.outcome != .reloaded {
        for e in trace.entries where e.verdict != .skipped {
          out +=
            "    \(e.verdict.rawValue.uppercased().padding(toLength: 5, withPad: " ", startingAt: 0)) \(e.step.rawValue): \(e.reason.map { "\($0.rawValue): " } ?? "")\(e.detail)\n"
        }
      }
      console.out(out)
    }
  }

  static func number(_ p: ParsedArguments, _ name: String, _ d: Double) throws(CommandFailure) -> Double {
    guard let raw = p.value(name) else { return d }
    guard let v = Double(raw), v >= 0, v.isFinite else {
      throw .usage(.invalidValue(option: name, value: raw, why: "expected a non-negative number"))
    }
    return v
  }
}

/// Changed paths collected by the watcher thread, taken by the main loop once they settle.
final class PendingChanges: Sendable {
  private let state = Mutex<
    (paths: Set<String>, first: ContinuousClock.Instant?, last: ContinuousClock.Instant?)
  >(([], nil, nil))

  func add(_ path: String, at: ContinuousClock.Instant) {
    state.withLock { s in
      s.paths.insert(path)
      if s.first == nil { s.first = at }
      s.last = at
    }
  }

  /// When the current burst will have settled.
  func due(after quiet: Double) -> ContinuousClock.Instant? {
    state.withLock { s in s.last.map { $0 + .wait(quiet) } }
  }

  /// The settled burst and when its first event came, or nil while it is still going on.
  func take(after quiet: Double) -> (Set<String>, ContinuousClock.Instant)? {
    state.withLock { s in
      guard let last = s.last, let first = s.first,
        ContinuousClock.now >= last + .wait(quiet)
      else {
        return nil
      }
      defer { s = ([], nil, nil) }
      return (s.paths, first)
    }
  }
}
