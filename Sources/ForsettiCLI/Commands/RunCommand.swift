import Dispatch
import ForsettiBinary
import ForsettiCore
import ForsettiRuntime
import Foundation
import Synchronization

/// `forsetti-host run`: discover, gate, load and start modules; run until SIGINT/SIGTERM or
/// `--for SECONDS`; stop them in reverse order.
enum RunCommand {
  static let defaultPlugins = ".build/plugins"

  static let spec = CommandSpec(
    name: "run",
    abstract: "Gate, load and start every module; run until interrupted; stop them cleanly.",
    discussion: """
      Without --plugins, binaries are taken from \(defaultPlugins) (scripts/build-plugins puts the
      examples there). Module log lines go to standard output (standard error with --json) and to
      STATE/logs/host.log; STATE/runtime.json and STATE/surface.json show this host's modules and UI
      surface to `forsetti-host list` and `forsetti-host surface`.

      EXIT STATUS:
        0  every module started and stopped cleanly
        1  at least one module was blocked or failed
        2  usage error: a bad option or value, or an unreadable input file
      """,
    options: HostOptions.specs + [
      .value("for", "SECONDS", "Stop after this many seconds instead of waiting for a signal.")
    ])

  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    var options = try HostOptions.parse(p)
    if options.pluginDirectories.isEmpty {
      guard FileManager.default.fileExists(atPath: defaultPlugins) else {
        throw .configuration(
          .directory(
            option: "plugins", path: defaultPlugins,
            reason: "no such directory; build the examples with scripts/build-plugins or pass --plugins DIR"))
      }
      options.pluginDirectories = [defaultPlugins]
    }
    var duration: Double?
    if let raw = p.value("for") {
      guard let d = Double(raw), d >= 0, d.isFinite else {
        throw .usage(
          .invalidValue(option: "for", value: raw, why: "expected a number of seconds, e.g. 5 or 0.5"))
      }
      duration = d
    }
    let report = try options.discover()
    let context = try options.gateContext(discovered: report.manifests)
    let index = BinaryIndex.build(directories: options.pluginDirectories)
    let judgements = GateStack.judge(
      report, context: context, inspect: index.inspectionStep(for:), laterSteps: nil)

    try? FileManager.default.createDirectory(
      atPath: (options.stateDirectory as NSString).appendingPathComponent("logs"),
      withIntermediateDirectories: true)
    var sinks: [any LogSink] = [StreamLogSink(fd: options.json ? 2 : 1)]
    if let file = FileLogSink(
      path: (options.stateDirectory as NSString).appendingPathComponent("logs/host.log"))
    {
      sinks.append(file)
    }
    let environment = HostEnvironment(stateDirectory: options.stateDirectory, log: FanOutLogSink(sinks))
    let manager = ModuleManager(environment: environment)

    let stopSignal = SignalWaiter()
    manager.activate(judgements, index: index)
    if !options.json { console.out(RunReport.table(manager.records)) }

    if manager.records.contains(where: { $0.state == .started }) {
      let why = stopSignal.wait(seconds: duration)
      environment.log.write(LogRecord(level: .info, moduleID: nil, message: "stopping all modules (\(why))"))
    }
    manager.stopAll()
    if options.json {
      console.out(JSONWriter.string(RunReport.json(manager.records), pretty: true) + "\n")
    } else {
      console.out(RunReport.summary(manager.records))
    }
    let clean = manager.records.allSatisfy { $0.state == .stopped }
    return clean ? .success : .blocked
  }
}

/// Waits for SIGINT, SIGTERM or a timeout, whichever comes first.
final class SignalWaiter {
  private let semaphore = DispatchSemaphore(value: 0)
  private let sources: [any DispatchSourceSignal]
  private let received = ReceivedSignal()

  init() {
    var made: [any DispatchSourceSignal] = []
    for sig in [SIGINT, SIGTERM] {
      signal(sig, SIG_IGN)
      let s = DispatchSource.makeSignalSource(signal: sig, queue: .global())
      made.append(s)
    }
    sources = made
    for (s, sig) in zip(sources, [SIGINT, SIGTERM]) {
      s.setEventHandler { [semaphore, received] in
        received.value.withLock { $0 = sig }
        semaphore.signal()
      }
      s.resume()
    }
  }

  /// Blocks until a signal arrives or `seconds` pass; says which.
  func wait(seconds: Double?) -> String {
    if let seconds {
      if semaphore.wait(timeout: .now() + seconds) == .timedOut { return "--for \(seconds)s elapsed" }
    } else {
      semaphore.wait()
    }
    let sig = received.value.withLock { $0 }
    return sig == SIGTERM ? "SIGTERM" : "SIGINT"
  }
}

/// The signal that ended the wait, shared with the signal handlers.
final class ReceivedSignal: Sendable {
  let value = Mutex<Int32?>(nil)
}
