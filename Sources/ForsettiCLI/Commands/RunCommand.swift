import Dispatch
import ForsettiBinary
import ForsettiCore
import ForsettiRuntime
import FoundationEssentials
import Glibc
import Synchronization

/// `forsetti-host run`: discover, gate, load and start modules; run until SIGINT/SIGTERM or
/// `--for SECONDS`; stop them in reverse order.
enum RunCommand {
  static let defaultPlugins = ".build/plugins"

  static let spec = CommandSpec(
    name: "run",
    abstract: "Gate, load and start the modules; keep converging on every change; stop them cleanly.",
    discussion: """
      The host judges every module, starts those that pass every gate and are active, and keeps
      judging while it runs: a change of STATE/approvals.json, overrides.json, activation.json,
      the licences or trusted keys under STATE, or the --entitlements file, a licence expiring or
      an override window opening or closing, starts what became eligible, stops what no longer is,
      and restarts a module with its new capabilities when its approval changes, at once and with
      one line each. The manifest and plugin directories are watched too: a module installed, or
      a failed or quarantined one rebuilt, starts; a running module keeps the version it loaded
      (`dev` reloads it). With nothing to run, the host waits.

      Of the eligible modules, those the activation state keeps off do not run (inactive):
      `forsetti-host disable`d ones, and all UI and app modules but one — the one `select`ed,
      else the first enabled by ID (`select --none`: none). With --default-policy deny, a free
      module runs only when `enable`d or forced on by `override module ID on`. With no
      STATE/activation.json, every eligible module is enabled.

      Each module runs in its own worker process (forsetti-worker, next to this executable), in
      a cgroup of its own, with no capabilities, in user, IPC and UTS namespaces of its own,
      confined with landlock to its sandbox, a seccomp policy and resource limits. A hang is
      reported (startTimedOut); a crash (crashed) or a frame out of turn (protocolViolation) is
      restarted with backoff, then quarantined until its binary changes. Module log lines are
      rate-limited (--log-rate) and the logs rotate. --in-process loads modules into the host
      instead, without any of this.

      Without --plugins, binaries are taken from \(defaultPlugins) (scripts/build-plugins puts the
      examples there). Log lines go to standard output, warnings and errors to standard error (all
      to standard error with --json; under systemd's journal they carry syslog priorities), and to
      STATE/logs/host.log; STATE/runtime.json and STATE/surface.json show this host's modules and UI
      surface to `forsetti-host list` and `forsetti-host surface`.

      With --export-dir, a module granted file_export writes files into DIR/<module ID>/ (made
      0750 by the host), the host doing the writing (for a worker too): under the last component
      of the name the module gives, never through a symbolic link, mode 0640, owned by the host's
      user (root when it runs as root). Without it those writes fail with FORSETTI_ERR_UNAVAILABLE
      and the log says so. What each module keeps in secure storage and in its export directory
      is bounded (--storage-quota, --export-quota); a write beyond fails with FORSETTI_ERR_QUOTA
      and the log names the quota.

      EXIT STATUS:
        0  stopped by SIGINT or SIGTERM; or, after --for, no module was blocked or failed
        1  after --for: at least one module was blocked or failed (a script's check)
        2  usage error: a bad option or value, or an unreadable input file
        75 the state directory was moved away or replaced under the host: it stopped its
           modules and touched nothing at the path (a new host may start on what is there)
      """,
    options: HostOptions.specs + [
      .value("for", "SECONDS", "Stop after this many seconds instead of waiting for a signal."),
      .value(
        "default-policy", "allow|deny",
        "deny: a free module runs only when enabled (forsetti-host enable) or overridden on.",
        default: "allow"),
      .flag("in-process", "Load modules into the host process: faster, but not confined or supervised."),
      .flag(
        "no-zygote",
        "Spawn each worker instead of forking it from the zygote: slower, but no two share an address-space layout."
      ),
      .value(
        "worker-env", "NAME[=VALUE]",
        "Pass this variable to every worker (NAME alone: the host's value); workers get no other of the host's but PATH, LANG, LC_*.",
        repeatable: true),
      .value(
        "start-timeout", "SECONDS",
        "Kill a worker whose confining and loading, or whose start, takes longer.",
        default: "5"),
      .value("stop-timeout", "SECONDS", "Kill a worker whose stop takes longer.", default: "5"),
      .value(
        "memory-limit", "MiB",
        "Memory of each worker: every kind, in its cgroup (address space only where there is none).",
        default: "2048"),
      .value(
        "cpu-limit", "SECONDS",
        "Total CPU time a worker may use before the kernel kills it (RLIMIT_CPU, at least 1); not a share.",
        default: "600"),
      .value(
        "cpu-weight", "[MODULE_ID=]N",
        "A module's CPU share against the others when the CPU is contended, in its cgroup: 1 to 10000; "
          + "a bare N sets every module's.",
        default: "100", repeatable: true),
      .value(
        "cpu-max", "[MODULE_ID=]PERCENT",
        "A module's hard CPU ceiling in percent of one CPU (50, 150), in its cgroup; a bare PERCENT sets "
          + "every module's.",
        default: "none", repeatable: true),
      .value("max-restarts", "N", "Restarts of a crashed worker before it is quarantined.", default: "3"),
      .value(
        "log-rate", "LINES",
        "Lines (and telemetry events) a second each module may log; more are dropped and counted.",
        default: "100"),
      .value(
        "log-burst", "LINES", "Lines a module may log at once before --log-rate applies.", default: "200"),
      .value("log-file-size", "MiB", "Size at which host.log and telemetry.jsonl rotate.", default: "8"),
      .value("log-files", "N", "Files kept of each log, the current one included.", default: "5"),
      .value(
        "export-dir", "DIR", "Where modules granted file_export write files; created (0750) if missing."
      ),
      .value(
        "storage-quota", "MiB", "Secure storage each module may fill, all its sealed values together.",
        default: "16"),
      .value(
        "export-quota", "MiB",
        "What each module may keep in its directory under --export-dir, all files together.",
        default: "256"),
      .flag("ui", "Serve the debug screen on 127.0.0.1 and print its address with a one-time token."),
      .value("ui-port", "PORT", "The debug screen's port (0: any free one).", default: "0"),
    ])

  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    try host(p, console: console, development: nil)
  }

  /// The host of `run` and `dev`: judge and start, converge on every change until a signal or
  /// `--for`, stop. The runtime does the judging and converging (`LiveHost`); this is its
  /// command line.
  static func host(
    _ p: ParsedArguments, console: Console, development: LiveHost.Development?
  ) throws(CommandFailure) -> ExitCode {
    var options = try HostOptions.parse(p)
    options.allowAllEntitlements = development != nil && p.flag("allow-all-entitlements")
    if let raw = p.value("default-policy") {
      guard let policy = DefaultPolicy(rawValue: raw) else {
        throw .usage(.invalidValue(option: "default-policy", value: raw, why: "expected allow or deny"))
      }
      options.defaultPolicy = policy
    }
    if options.pluginDirectories.isEmpty {
      guard FileManager.default.fileExists(atPath: defaultPlugins) else {
        throw .configuration(
          .directory(
            option: "plugins", path: defaultPlugins,
            reason: "no such directory; build the examples with scripts/build-plugins or pass --plugins DIR"))
      }
      options.pluginDirectories = [defaultPlugins]
    }
    let duration = try seconds(p, "for", default: nil)
    var mode = ExecutionMode.inProcess
    if !p.flag("in-process") {
      var settings = IsolationSettings(workerExecutable: IsolationSettings.defaultWorker)
      guard FileManager.default.isExecutableFile(atPath: settings.workerExecutable) else {
        throw .configuration(.workerMissing(path: settings.workerExecutable))
      }
      settings.startTimeout = try seconds(p, "start-timeout", default: 5) ?? 5
      settings.stopTimeout = try seconds(p, "stop-timeout", default: 5) ?? 5
      if let mib = try bounded(p, "memory-limit", atMost: 16_777_216, "MiB (16 TiB)") {
        settings.limits.memoryBytes = UInt64(mib * 1024 * 1024)
      }
      if let cpu = try bounded(p, "cpu-limit", atMost: 1e9, "seconds") {
        settings.limits.cpuSeconds = UInt64(max(1, cpu))
      }
      if let n = try bounded(p, "max-restarts", atMost: 1000, "restarts") { settings.maxRestarts = Int(n) }
      settings.cpu = try cpuShares(p)
      settings.zygote = !p.flag("no-zygote")
      for argument in p.all("worker-env") {
        do throws(WorkerEnvironment.Refusal) {
          try settings.workerEnvironment.pass(argument, host: ProcessInfo.processInfo.environment)
        } catch {
          throw .usage(.invalidValue(option: "worker-env", value: argument, why: error.description))
        }
      }
      mode = .isolated(settings)
    }
    let limits = try logLimits(p)
    let exportDirectory = try exportDirectory(p)
    let quotas = try quotas(p)
    // One host per state directory, decided before anything in it is touched. The directory is
    // held by identity: the lock, the logs and runtime.json go into the directory opened here,
    // whatever is put at its path later (StateDirectoryHold).
    try? FileManager.default.createDirectory(
      atPath: options.stateDirectory, withIntermediateDirectories: true)
    let hold: StateDirectoryHold
    do { hold = try StateDirectoryHold(path: options.stateDirectory) } catch {
      throw .configuration(
        .directory(option: "state", path: options.stateDirectory, reason: error.description))
    }
    let lock: HostLock
    do { lock = try HostLock(in: hold) } catch {
      throw .configuration(
        .directory(option: "state", path: options.stateDirectory, reason: error.description))
    }
    if !options.approveAll {
      let report = try options.discover()
      // Reductions shrink the stored approval at once (Apsule), before anything is asked.
      _ = try? ApprovalStore(stateDirectory: options.stateDirectory).shrink(to: report.manifests)
      try ApprovalPrompt.ask(report.manifests, options: options, console: console)
    }

    _ = mkdirat(hold.fd, "logs", 0o755)
    let uiPort = try port(p)
    let webEvents = WebEvents()
    var sinks: [any LogSink] = [StreamLogSink(fd: options.json ? 2 : 1)]
    if uiPort != nil { sinks.append(WebLogSink(webEvents)) }
    if let file = FileLogSink(path: hold.within("logs/host.log"), rotation: limits.rotation) {
      sinks.append(file)
    }
    let environment = HostEnvironment(
      stateDirectory: options.stateDirectory, log: FanOutLogSink(sinks), limits: limits,
      exportDirectory: exportDirectory, quotas: quotas)
    if let exportDirectory {
      environment.hostLog(
        .info, "file export: modules granted file_export write into \(exportDirectory)/<module ID>/")
    }
    let manager = ModuleManager(environment: environment, mode: mode)
    manager.stateDirectoryHold = hold
    // From a copy always (in memory in-process, under STATE/versions/ for a worker): `reload ID`
    // (and dev) may replace the file while the loaded version must stay reachable for a rollback.
    manager.versionCopies = true
    manager.keepsSpareWorker = development != nil
    if case .isolated(let settings) = mode {
      environment.hostLog(.info, "isolation: \(IsolationSettings.kernelSupport())")
      environment.hostLog(.info, "cgroups: \(ModuleManager.cgroupSupport(cpu: settings.cpu))")
    }

    let loop = SignalWaiter()
    hold.whenReplaced { [waker = loop.waker] _ in waker() }
    let host = LiveHost(judge: options.judge, manager: manager, development: development, wake: loop.waker)
    host.onReload = { r in
      console.out(DevCommand.describe(r))
      webEvents.publish("reload", .object(JSONObject([("line", .string(r.line))])))
    }
    host.onChange = { change in
      guard case .module(let r) = change else { return }
      webEvents.publish(
        "state",
        .object(
          JSONObject([
            ("moduleID", .string(orNull: r.moduleID)), ("state", .string(r.state.name)),
            ("reason", .string(orNull: r.state.reason?.rawValue)),
          ])))
    }
    do { try host.start() } catch {
      manager.stopAll()
      throw HostOptions.failure(error)
    }
    if case .isolated(let settings) = mode {
      // A module ID mistyped in --cpu-weight or --cpu-max would otherwise go unnoticed.
      let found = Set(manager.records.compactMap(\.moduleID))
      for id in settings.cpu.namedModules.subtracting(found).sorted() {
        environment.hostLog(
          .warning,
          "cpu: --cpu-weight or --cpu-max names \(id), which is no module found at start (a typo?); "
            + "it applies if that module appears")
      }
    }
    if !options.json { console.out(RunReport.table(manager.records)) }
    let running = manager.records.filter { $0.state == .started }.count
    ServiceNotifier.ready(status: "\(running) of \(manager.records.count) modules running")
    // The control socket is made at the path: not once the path names another directory.
    var server: ControlServer?
    if hold.check() == nil {
      do { server = try ControlServer(stateDirectory: options.stateDirectory, wake: loop.waker) } catch {
        host.stop()
        throw .configuration(.directory(option: "state", path: options.stateDirectory, reason: "\(error)"))
      }
    }
    var screen: DebugScreen?
    if let uiPort, let server {
      do { screen = try DebugScreen(port: uiPort, events: webEvents, ask: server.ask) } catch {
        server.stop()
        host.stop()
        throw .configuration(.directory(option: "ui-port", path: String(uiPort), reason: error.description))
      }
      console.out("ui: \(screen?.url ?? "")\n")
    }
    let answerer = ControlAnswerer(host: host, stateDirectory: options.stateDirectory, pid: getpid())

    let deadline = duration.map { ContinuousClock.now + .wait($0) }
    var why = "--for \(duration ?? 0)s elapsed"
    var signalled = false
    var replaced = false
    while true {
      // Each round looks at the path too: the watch misses an ancestor reached through a link.
      if let r = hold.check() {
        // Acting on the directory now at the path would be acting on another host's (its
        // runtime.json, its socket) or on one an operator put there for a new host; this host's
        // modules stop, and a service manager restarts a host on what is really there.
        environment.hostLog(
          .error,
          "\(hold.describe(r)); this host stops, and touches nothing at \(hold.path) (exit status \(ExitCode.stateDirectoryReplaced.rawValue)); a new host may start on the directory now there"
        )
        why = "state directory replaced"
        replaced = true
        break
      }
      if let deadline, ContinuousClock.now >= deadline { break }
      let until = [deadline, host.nextDue].compactMap { $0 }.min()
      if let stop = loop.wait(until: until) {
        why = stop
        signalled = true
        break
      }
      host.process()
      server?.serve(answerer.answer)
    }
    environment.hostLog(.info, "stopping all modules (\(why))")
    ServiceNotifier.stopping()
    screen?.stop()
    // ControlServer.stop unlinks control.sock by path: at a replaced path that is another
    // host's socket. This host's own is removed in the directory it holds (no other host can
    // have made one there: this one holds its lock); a client waiting on it reads the end of
    // the connection when the host exits.
    if hold.check() == nil {
      server?.stop()
    } else if server != nil {
      _ = unlinkat(hold.fd, "control.sock", 0)
    }
    host.stop()
    hold.stop()
    withExtendedLifetime(lock) {}
    // Counts of lines dropped by the rate limit are written before the summary.
    environment.limiter.flush()
    if options.json {
      console.out(JSONWriter.string(RunReport.json(manager.records), pretty: true) + "\n")
    } else {
      console.out(RunReport.summary(manager.records))
    }
    if replaced { return .stateDirectoryReplaced }
    // Stopped on request, the host did its job; after --for, a script asks whether all went well.
    if signalled { return .success }
    let clean = manager.records.allSatisfy { r in
      switch r.state {
      case .blocked, .failed: false
      default: true
      }
    }
    return clean ? .success : .blocked
  }
}

/// The debug screen's port when `--ui` is given (0: any free one), nil without it.
private func port(_ p: ParsedArguments) throws(CommandFailure) -> UInt16? {
  guard p.flag("ui") else {
    if let raw = p.value("ui-port") {
      throw .usage(.invalidValue(option: "ui-port", value: raw, why: "it goes with --ui"))
    }
    return nil
  }
  guard let raw = p.value("ui-port") else { return 0 }
  guard let n = UInt16(raw) else {
    throw .usage(.invalidValue(option: "ui-port", value: raw, why: "expected a port number, 0 to 65535"))
  }
  return n
}

/// `--export-dir` as an absolute path to a directory, created (0750) if missing; nil without it.
private func exportDirectory(_ p: ParsedArguments) throws(CommandFailure) -> String? {
  guard let raw = p.value("export-dir") else { return nil }
  guard !raw.isEmpty else {
    throw .usage(.invalidValue(option: "export-dir", value: raw, why: "expected a directory"))
  }
  let path = URL(fileURLWithPath: raw).standardizedFileURL.path
  do {
    try FileManager.default.createDirectory(
      atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o750])
  } catch {
    throw .configuration(
      .directory(option: "export-dir", path: path, reason: "cannot create it: \(SystemReason.of(error))"))
  }
  var isDirectory = false
  guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory else {
    throw .configuration(.directory(option: "export-dir", path: path, reason: "not a directory"))
  }
  return path
}

/// `--cpu-weight` and `--cpu-max`, each value `[MODULE_ID=]N`, in the order given (a later value
/// for the same module wins).
private func cpuShares(_ p: ParsedArguments) throws(CommandFailure) -> CPUShares {
  var shares = CPUShares()
  do {
    for v in p.all("cpu-weight") { try shares.setWeight(v) }
    for v in p.all("cpu-max") { try shares.setMaxPercent(v) }
  } catch {
    throw .usage(.invalidValue(option: error.option, value: error.value, why: error.description))
  }
  return shares
}

/// `--storage-quota` and `--export-quota` in bytes, checked.
private func quotas(_ p: ParsedArguments) throws(CommandFailure) -> ServiceQuotas {
  var quotas = ServiceQuotas.standard
  // Clamped by `bounded` before conversion: Int of a larger Double would trap.
  if let mib = try bounded(p, "storage-quota", atMost: 1_048_576, "MiB (1 TiB)") {
    quotas.secureStorageBytes = Int(mib * 1_048_576)
  }
  if let mib = try bounded(p, "export-quota", atMost: 16_777_216, "MiB (16 TiB)") {
    quotas.exportBytes = Int(mib * 1_048_576)
  }
  return quotas
}

/// The log limits of `--log-rate`, `--log-burst`, `--log-file-size` and `--log-files`, checked.
private func logLimits(_ p: ParsedArguments) throws(CommandFailure) -> LogLimits {
  var limits = LogLimits()
  // Clamped before conversion: Int(1e300) would trap; the range check then names the value.
  if let v = try seconds(p, "log-rate", default: nil) { limits.linesPerSecond = Int(min(v, 1e12)) }
  if let v = try seconds(p, "log-burst", default: nil) { limits.burstLines = Int(min(v, 1e12)) }
  if let v = try seconds(p, "log-file-size", default: nil) {
    limits.maxFileBytes = Int(min(v, 1e6) * 1_048_576)
  }
  if let v = try seconds(p, "log-files", default: nil) { limits.keptFiles = Int(min(v, 1e12)) }
  do { return try limits.validated() } catch {
    let option: String =
      switch error {
      case .outOfRange(let setting, _, _):
        setting.contains("burst")
          ? "log-burst"
          : setting.contains("size") ? "log-file-size" : setting.contains("kept") ? "log-files" : "log-rate"
      }
    throw .usage(.invalidValue(option: option, value: p.value(option) ?? "", why: error.description))
  }
}

/// A non-negative number option no larger than `limit` (a conversion of a larger one would trap).
private func bounded(_ p: ParsedArguments, _ name: String, atMost limit: Double, _ unit: String)
  throws(CommandFailure) -> Double?
{
  guard let v = try seconds(p, name, default: nil) else { return nil }
  guard v <= limit else {
    throw .usage(
      .invalidValue(
        option: name, value: p.value(name) ?? "", why: "at most \(Int(limit)) \(unit)"))
  }
  return v
}

/// Parses a non-negative number of seconds (or any non-negative number) option.
private func seconds(_ p: ParsedArguments, _ name: String, default d: Double?) throws(CommandFailure)
  -> Double?
{
  guard let raw = p.value(name) else { return d }
  guard let v = Double(raw), v >= 0, v.isFinite else {
    throw .usage(
      .invalidValue(option: name, value: raw, why: "expected a non-negative number, e.g. 5 or 0.5"))
  }
  return v
}

/// The host's main loop: sleeps until SIGINT/SIGTERM, a wake-up from supervision, or a time.
final class SignalWaiter {
  private let semaphore = DispatchSemaphore(value: 0)
  private let sources: [any DispatchSourceSignal]
  private let received = ReceivedSignal()

  init() {
    let signals = [SIGINT, SIGTERM]
    var made: [any DispatchSourceSignal] = []
    for sig in signals {
      // Not SIG_IGN: Dispatch installs its own handler only once the source is registered, on
      // its own thread, and a signal ignored meanwhile would be lost (a SIGTERM right after
      // start left the host running). The latch keeps it until then.
      SignalLatch.install(sig)
      made.append(DispatchSource.makeSignalSource(signal: sig, queue: .global()))
    }
    sources = made
    for (s, sig) in zip(sources, signals) {
      s.setEventHandler { [semaphore, received] in Self.deliver(sig, semaphore, received) }
      s.resume()
    }
    // Until Dispatch's handlers are in place (microseconds; bounded, should it never say so),
    // then whatever the latch caught counts as received.
    var waited = 0
    while signals.contains(where: SignalLatch.isInstalled) && waited < 2_000 {
      usleep(1_000)
      waited += 1
    }
    for sig in signals where SignalLatch.caught(sig) { Self.deliver(sig, semaphore, received) }
  }

  private static func deliver(_ sig: Int32, _ semaphore: DispatchSemaphore, _ received: ReceivedSignal) {
    let again = received.value.withLock { r in
      defer { r = sig }
      return r != nil
    }
    if again {
      // A second Ctrl-C means "now": a module stuck in start or stop must not hold the host.
      let text = "forsetti-host: second signal, exiting without waiting for modules\n"
      _ = text.withCString { write(2, $0, strlen($0)) }
      _exit(130)
    }
    semaphore.signal()
  }

  /// Wakes `wait` without a signal (supervision has work); callable from any thread.
  var waker: @Sendable () -> Void { { [semaphore] in semaphore.signal() } }

  /// Sleeps until a signal (returns its name), a wake-up or `until` (returns nil).
  func wait(until: ContinuousClock.Instant?) -> String? {
    if let until {
      let left = until - ContinuousClock.now
      let ns = max(
        0, Int(left.components.seconds) * 1_000_000_000 + Int(left.components.attoseconds / 1_000_000_000))
      _ = semaphore.wait(timeout: .now() + .nanoseconds(ns))
    } else {
      semaphore.wait()
    }
    guard let sig = received.value.withLock({ $0 }) else { return nil }
    return sig == SIGTERM ? "SIGTERM" : "SIGINT"
  }
}

/// The signal that ended the wait, shared with the signal handlers.
final class ReceivedSignal: Sendable {
  let value = Mutex<Int32?>(nil)
}
