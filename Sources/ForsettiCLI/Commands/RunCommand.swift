import ForsettiBinary
import ForsettiCore
import ForsettiHost
import ForsettiRuntime
import FoundationEssentials
import Glibc

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

      Options may also come from a configuration file: --config FILE, else \(ConfigSource.defaultPath)
      when it exists. Each line is 'option = value' with a long option's name ('state =
      /var/lib/forsetti'; a flag takes true or false: 'approve-all = true'); a repeatable option is
      given on several lines; a line starting with # is a comment (a # after a value is part of
      it). The command line wins, option by option (--flag=false turns off a flag the file turns
      on). --print-config prints the effective options and where each came from, then checks them
      as run would without starting anything (exit 2 naming what is wrong).

      EXIT STATUS:
        0  stopped by SIGINT or SIGTERM; or, after --for, no module was blocked or failed
        1  after --for: at least one module was blocked or failed (a script's check)
        2  usage error: a bad option or value, or an unreadable input file
        75 the state directory was moved away or replaced under the host: it stopped its
           modules and touched nothing at the path (a new host may start on what is there)
      """,
    options: HostOptions.specs + ConfigSource.specs + [
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
        "tmpdir-size", "MiB",
        "Size of each worker's TMPDIR: a tmpfs in its own mount namespace, counted in its memory (0: TMPDIR on the host's disk, unbounded).",
        default: "256"),
      .value(
        "sandbox-quota", "MiB",
        "What each module's sandbox directory may hold on disk, counted by the host; over it, the module's writes fail (EFBIG) until it frees space (0: unbounded).",
        default: "1024"),
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
      .value(
        "metrics", "ADDRESS:PORT",
        "Serve Prometheus metrics at http://ADDRESS:PORT/metrics (PORT alone: 127.0.0.1; [::1]:PORT for IPv6; "
          + "port 0: any free one, printed). No authentication: keep it on loopback unless the network is trusted."
      ),
    ])

  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    try host(p, console: console, development: nil)
  }

  /// `run --print-config`'s check: what `run` would refuse before starting anything.
  static func check(_ p: ParsedArguments) throws(CommandFailure) { _ = try settings(p, development: false) }

  /// The host of `run` and `dev`: judge and start, converge on every change until a signal or
  /// `--for`, stop. The facade (`ForsettiHost`) runs the host; this is its command line: the
  /// options, the approval prompt, the start table and summary, the debug screen, exit codes.
  static func host(
    _ p: ParsedArguments, console: Console, development: LiveHost.Development?
  ) throws(CommandFailure) -> ExitCode {
    let checked = try settings(p, development: development != nil)
    OpenFileLimit.raise()
    let options = checked.options
    let duration = checked.duration
    let uiPort = checked.uiPort
    var configuration = ForsettiHost.Configuration(
      manifestsDirectory: options.manifestsDirectory, pluginDirectories: options.pluginDirectories,
      stateDirectory: options.stateDirectory)
    configuration.judging = options.configuration
    configuration.development = development
    configuration.isolation = checked.isolation
    configuration.logLimits = checked.logLimits
    configuration.exportDirectory = try exportDirectory(p)
    configuration.quotas = checked.quotas
    configuration.metricsAddress = checked.metricsAddress
    // A SIGTERM while modules start (systemd's stop right after its start) must stop the host.
    configuration.catchesSignalsAtStart = true
    let webEvents = WebEvents()
    // Structured entries when the journal reads the host ($JOURNAL_STREAM), plain lines otherwise.
    configuration.logSinks = [JournalLogSink.selected(fd: options.json ? 2 : 1)]
    if uiPort != nil { configuration.logSinks.append(WebLogSink(webEvents)) }

    // One host per state directory, decided before anything in it is touched.
    let host: ForsettiHost
    do { host = try ForsettiHost(configuration) } catch { throw failure(error, options) }
    if !options.approveAll {
      let report = try options.discover()
      // Reductions shrink the stored approval at once (Apsule), before anything is asked.
      _ = try? ApprovalStore(stateDirectory: options.stateDirectory).shrink(to: report.manifests)
      try ApprovalPrompt.ask(report.manifests, options: options, console: console)
    }
    host.observeReloads { r in
      console.out(DevCommand.describe(r))
      webEvents.publish("reload", .object(JSONObject([("line", .string(r.line))])))
    }
    host.observe { change in
      guard case .module(let r) = change else { return }
      webEvents.publish(
        "state",
        .object(
          JSONObject([
            ("moduleID", .string(orNull: r.moduleID)), ("state", .string(r.state.name)),
            ("reason", .string(orNull: r.state.reason?.rawValue)),
          ])))
    }
    do { try host.start() } catch { throw failure(error, options) }
    if !options.json { console.out(RunReport.table(host.modules)) }
    var screen: DebugScreen?
    if let uiPort, host.controlSocketPath != nil {
      do { screen = try DebugScreen(port: uiPort, events: webEvents, ask: host.ask) } catch {
        host.stop(because: "the debug screen could not start")
        throw .configuration(.directory(option: "ui-port", path: String(uiPort), reason: error.description))
      }
      console.out("ui: \(screen?.url ?? "")\n")
    }

    let ending = host.run(until: duration.map { ContinuousClock.now + .wait($0) })
    let why: String =
      switch ending {
      case .signal(let name): name
      case .deadline: "--for \(duration ?? 0)s elapsed"
      case .stopRequested: "stop requested"
      case .stateDirectoryReplaced: "state directory replaced"
      }
    screen?.stop()
    host.stop(because: why)
    let records = host.modules
    if options.json {
      console.out(JSONWriter.string(RunReport.json(records), pretty: true) + "\n")
    } else {
      console.out(RunReport.summary(records))
    }
    switch ending {
    case .stateDirectoryReplaced: return .stateDirectoryReplaced
    // Stopped on request, the host did its job; after --for, a script asks whether all went well.
    case .signal, .stopRequested: return .success
    case .deadline:
      let clean = records.allSatisfy { r in
        switch r.state {
        case .blocked, .failed: false
        default: true
        }
      }
      return clean ? .success : .blocked
    }
  }

  /// The options of `run` (and `dev`) as checked before anything starts.
  struct Settings {
    var options: HostOptions
    var duration: Double?
    var isolation: IsolationSettings?
    var logLimits: LogLimits
    var quotas: ServiceQuotas
    var metricsAddress: MetricsAddress?
    var uiPort: UInt16?
  }

  /// Every option's value checked as `run` needs it: numbers and addresses, the policy file, the
  /// plugin directories, the worker, the keys `--require-signatures` needs. Reads, never writes
  /// (`--export-dir` is made by `host`): `--print-config` checks the same.
  static func settings(_ p: ParsedArguments, development: Bool) throws(CommandFailure) -> Settings {
    // Every value is checked even after one failed: a file with three bad lines says three.
    var checks = SettingChecks()
    var options = try HostOptions.parse(p)
    options.allowAllEntitlements = development && p.flag("allow-all-entitlements")
    if let raw = p.value("default-policy") {
      if let policy = DefaultPolicy(rawValue: raw) {
        options.defaultPolicy = policy
      } else {
        _ = checks.run { () throws(CommandFailure) in
          throw .usage(.invalidValue(option: "default-policy", value: raw, why: "expected allow or deny"))
        }
      }
    }
    if options.pluginDirectories.isEmpty {
      if FileManager.default.fileExists(atPath: defaultPlugins) {
        options.pluginDirectories = [defaultPlugins]
      } else {
        _ = checks.run { () throws(CommandFailure) in
          throw .configuration(
            .directory(
              option: "plugins", path: defaultPlugins,
              reason: "no such directory; build the examples with scripts/build-plugins or pass --plugins DIR"
            ))
        }
      }
    }
    var metricsAddress: MetricsAddress?
    if let raw = p.value("metrics") {
      metricsAddress = checks.run { () throws(CommandFailure) -> MetricsAddress in
        do throws(MetricsAddress.ParseError) { return try MetricsAddress(parsing: raw) } catch {
          throw .usage(.invalidValue(option: "metrics", value: raw, why: error.description))
        }
      }
    }
    let duration = checks.run { () throws(CommandFailure) in try seconds(p, "for", default: nil) }
    let workers = Self.isolation(p, &checks)
    let logs = checks.run { () throws(CommandFailure) in try logLimits(p) }
    let serviceQuotas = checks.run { () throws(CommandFailure) in try quotas(p) }
    let uiPort = checks.run { () throws(CommandFailure) in try port(p) }
    try checks.finish()
    // Past `finish` every check passed: the defaults below are never the ones used.
    return Settings(
      options: options, duration: duration ?? nil, isolation: workers, logLimits: logs ?? LogLimits(),
      quotas: serviceQuotas ?? .standard, metricsAddress: metricsAddress, uiPort: uiPort ?? nil)
  }

  /// The command line's form of a host's failure to hold its state directory or start.
  private static func failure(_ e: ForsettiHostError, _ options: HostOptions) -> CommandFailure {
    switch e {
    case .stateDirectoryUnusable(let path, let reason):
      .configuration(.directory(option: "state", path: path, reason: reason))
    case .stateDirectoryLocked(let path, _, let reason):
      .configuration(.directory(option: "state", path: path, reason: reason))
    case .workerMissing(let path, let why): .configuration(.workerMissing(path: path, reason: why))
    case .judging(let e): HostOptions.failure(e)
    case .controlSocket(_, let reason):
      .configuration(.directory(option: "state", path: options.stateDirectory, reason: "\(reason)"))
    case .metrics(let address, let reason):
      .configuration(.directory(option: "metrics", path: address, reason: reason))
    case .logLimits, .service, .wrongPhase:
      .configuration(.directory(option: "state", path: options.stateDirectory, reason: e.description))
    }
  }

  /// Where modules run: `--in-process`, or workers with the limits of the options (each bad
  /// one kept in `checks`).
  private static func isolation(_ p: ParsedArguments, _ checks: inout SettingChecks) -> IsolationSettings? {
    guard !p.flag("in-process") else { return nil }
    var settings = IsolationSettings(workerExecutable: IsolationSettings.defaultWorker)
    if let why = ExecutableReach.problem(settings.workerExecutable) {
      _ = checks.run { () throws(CommandFailure) in
        throw .configuration(.workerMissing(path: settings.workerExecutable, reason: why))
      }
    }
    func number(_ name: String, atMost limit: Double, _ unit: String) -> Double? {
      checks.run { () throws(CommandFailure) in try bounded(p, name, atMost: limit, unit) } ?? nil
    }
    if let v = checks.run({ () throws(CommandFailure) in try seconds(p, "start-timeout", default: 5) }) {
      settings.startTimeout = v ?? 5
    }
    if let v = checks.run({ () throws(CommandFailure) in try seconds(p, "stop-timeout", default: 5) }) {
      settings.stopTimeout = v ?? 5
    }
    if let mib = number("memory-limit", atMost: 16_777_216, "MiB (16 TiB)") {
      settings.limits.memoryBytes = UInt64(mib * 1024 * 1024)
    }
    if let mib = number("tmpdir-size", atMost: 1_048_576, "MiB (1 TiB)") {
      settings.limits.temporaryBytes = mib == 0 ? nil : UInt64(mib * 1024 * 1024)
    }
    if let mib = number("sandbox-quota", atMost: 16_777_216, "MiB (16 TiB)") {
      settings.sandboxBytes = mib == 0 ? nil : UInt64(mib * 1024 * 1024)
    }
    if let cpu = number("cpu-limit", atMost: 1e9, "seconds") {
      settings.limits.cpuSeconds = UInt64(max(1, cpu))
    }
    if let n = number("max-restarts", atMost: 1000, "restarts") { settings.maxRestarts = Int(n) }
    if let cpu = checks.run({ () throws(CommandFailure) in try cpuShares(p) }) { settings.cpu = cpu }
    settings.zygote = !p.flag("no-zygote")
    for argument in p.all("worker-env") {
      do throws(WorkerEnvironment.Refusal) {
        try settings.workerEnvironment.pass(argument, host: ProcessInfo.processInfo.environment)
      } catch {
        _ = checks.run { () throws(CommandFailure) in
          throw .usage(.invalidValue(option: "worker-env", value: argument, why: error.description))
        }
      }
    }
    return settings
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
