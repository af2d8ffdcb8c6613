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
           modules and touched nothing at the path (a new host may start on what is there);
           or an image `upgrade` started could not take the host over (start it again)
      """,
    options: HostOptions.specs + ConfigSource.specs + [
      .value(
        "for", "SECONDS",
        "Stop after this many seconds instead of waiting for a signal (0: start, stop, and watch nothing)."),
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
    try host(p, console: console, development: false)
  }

  /// `run --print-config`'s check: what `run` would refuse before starting anything.
  static func check(_ p: ParsedArguments) throws(CommandFailure) { _ = try settings(p, development: false) }

  /// The host of `run` and `dev`: judge and start, converge on every change until a signal or
  /// `--for`, stop. The facade (`ForsettiHost`) runs the host; this is its command line: the
  /// options, the approval prompt, the start table and summary, the debug screen, exit codes.
  static func host(
    _ p: ParsedArguments, console: Console, development: Bool
  ) throws(CommandFailure) -> ExitCode {
    guard getenv(Handover.environmentVariable) != nil else {
      return try hosting(p, console: console, development: development)
    }
    // An image an upgrade started: the previous one is gone, so whatever stops this one (a
    // handover it cannot take, a host.conf edited since, a port taken) must not be the exit 2
    // a service manager leaves down; 75 has it start the host again.
    do { return try hosting(p, console: console, development: development) } catch {
      _ = ForsettiHostCLI.fail(error, command: development ? "dev" : "run", console: console)
      console.err(
        "forsetti-host: upgrade: this image could not take the host over; exit 75, so that the service manager starts the host again\n"
      )
      return .stateDirectoryReplaced
    }
  }

  private static func hosting(
    _ p: ParsedArguments, console: Console, development: Bool
  ) throws(CommandFailure) -> ExitCode {
    let checked = try settings(p, development: development)
    OpenFileLimit.raise()
    let options = checked.options
    let duration = checked.duration
    let uiPort = checked.uiPort
    var configuration = checked.host
    // `upgrade` execs this same command line in this process; an image it started finds what it
    // hands over in the environment.
    configuration.upgradeArguments = CommandLine.arguments
    if uiPort != nil {
      configuration.upgradeRefusal =
        "the debug page (--ui) is not handed over to a new image yet: its address and token would change; restart the host instead"
    }
    configuration.handover = try handedOver(stateDirectory: configuration.judging.stateDirectory)
    // `--for 0` stops at once: nothing it would watch for can change what it does.
    configuration.watchesChanges = duration != 0
    configuration.exportDirectory = try exportDirectory(p)
    // A SIGTERM while modules start (systemd's stop right after its start) must stop the host.
    configuration.catchesSignalsAtStart = true
    let webEvents = WebEvents()
    // Structured entries when the journal reads the host ($JOURNAL_STREAM), plain lines otherwise.
    configuration.logSinks = [JournalLogSink.selected(fd: options.json ? 2 : 1)]
    if uiPort != nil { configuration.logSinks.append(WebLogSink(webEvents)) }

    // One host per state directory, decided before anything in it is touched.
    let host: ForsettiHost
    do { host = try ForsettiHost(configuration) } catch { throw failure(error, options) }
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
    // The prompt runs inside start, on the manifests its first judgement discovered (and after
    // the approvals of modules that now ask for less were shrunk: Apsule), before approvals are
    // read: what the operator approves there is granted at once.
    var promptFailure: CommandFailure?
    do {
      try host.start { manifests in
        guard !options.judging.approveAll else { return true }
        do throws(CommandFailure) {
          try ApprovalPrompt.ask(manifests, options: options, console: console)
        } catch {
          promptFailure = error
        }
        return promptFailure == nil
      }
    } catch {
      if let promptFailure { throw promptFailure }
      throw failure(error, options)
    }
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
    /// The host's configuration, every setting within its range (`validated()`).
    var host: ForsettiHost.Configuration
    var uiPort: UInt16?
  }

  /// Every option's value checked as `run` needs it: the judging options (`HostOptions`), then
  /// each host setting through the facade's table (`SettingKey`: an option's name is its key in
  /// host.conf and in the C API) and its ranges (`validated()`), the worker, `--for` and the
  /// debug screen's port. Reads, never writes (`--export-dir` is made by `host`):
  /// `--print-config` checks the same.
  static func settings(_ p: ParsedArguments, development: Bool) throws(CommandFailure) -> Settings {
    // Every value is checked even after one failed: a file with three bad lines says three.
    var checks = SettingChecks()
    var options = try HostOptions.parse(p)
    options.judging.allowAllEntitlements = development && p.flag("allow-all-entitlements")
    if let raw = p.value("default-policy") {
      if let policy = DefaultPolicy(rawValue: raw) {
        options.judging.defaultPolicy = policy
      } else {
        _ = checks.run { () throws(CommandFailure) in
          throw .usage(.invalidValue(option: "default-policy", value: raw, why: "expected allow or deny"))
        }
      }
    }
    if options.judging.pluginDirectories.isEmpty {
      if FileManager.default.fileExists(atPath: defaultPlugins) {
        options.judging.pluginDirectories = [defaultPlugins]
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
    var host = ForsettiHost.Configuration(
      manifestsDirectory: options.judging.manifestsDirectory,
      pluginDirectories: options.judging.pluginDirectories,
      stateDirectory: options.judging.stateDirectory)
    host.judging = options.judging
    if development { host.development = DevelopmentSettings(grace: 0.5, debounce: 0.1) }
    if let worker = host.isolation?.workerExecutable, !p.flag("in-process"),
      let why = ExecutableReach.problem(worker)
    {
      _ = checks.run { () throws(CommandFailure) in
        throw .configuration(.workerMissing(path: worker, reason: why))
      }
    }
    for entry in SettingKey.hostKeys {
      let given: [String]
      if entry.isFlag {
        given = p.flag(entry.key) ? ["true"] : []
      } else if let raw = exportDirectoryText(p), entry.key == "export-dir" {
        given = [raw]
      } else {
        given = entry.repeatable ? p.all(entry.key) : p.value(entry.key).map { [$0] } ?? []
      }
      for text in given {
        _ = checks.run { () throws(CommandFailure) in
          do throws(SettingProblem) { try host.set(entry.key, to: text) } catch {
            throw Self.failure(error, given: text)
          }
        }
      }
    }
    for problem in host.settingProblems {
      let owner = SettingKey.owning(problem.setting)
      let raw = owner.flatMap { $0.repeatable ? nil : p.value($0.key) }
      _ = checks.run { () throws(CommandFailure) in throw Self.failure(problem, given: raw ?? problem.value) }
    }
    let duration = checks.run { () throws(CommandFailure) in try seconds(p, "for", default: nil) }
    let uiPort = checks.run { () throws(CommandFailure) in try port(p) }
    try checks.finish()
    return Settings(options: options, duration: duration ?? nil, host: host, uiPort: uiPort ?? nil)
  }

  /// What the image this process was before an upgrade handed over, its descriptors checked;
  /// nil at a first start. The variable is unset: no worker or later image inherits it.
  static func handedOver(stateDirectory: String) throws(CommandFailure) -> Handover? {
    guard let raw = getenv(Handover.environmentVariable) else { return nil }
    let text = String(cString: raw)
    unsetenv(Handover.environmentVariable)
    guard let fd = Int32(text), fd >= 0 else {
      throw .configuration(.handover("\(Handover.environmentVariable)='\(text)' is not a descriptor"))
    }
    defer { close(fd) }
    do throws(Handover.Refusal) {
      let handover = try Handover.read(fd: fd)
      // Not inherited by anything this image starts before it adopts them.
      for kept in handover.descriptors {
        _ = fcntl(kept, F_SETFD, FD_CLOEXEC)
      }
      try handover.checkDescriptors(stateDirectory: stateDirectory)
      return handover
    } catch {
      throw .configuration(.handover(error.description))
    }
  }

  /// A host setting refused, as the option that gave it: `--memory-limit '99999999': at most …`.
  static func failure(_ problem: SettingProblem, given text: String) -> CommandFailure {
    let owner = SettingKey.owning(problem.setting)
    return .usage(
      .invalidValue(
        option: owner?.key ?? problem.setting, value: text, why: owner?.explained(problem.why) ?? problem.why)
    )
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
      .configuration(.directory(option: "state", path: options.judging.stateDirectory, reason: "\(reason)"))
    case .metrics(let address, let reason):
      .configuration(.directory(option: "metrics", path: address, reason: reason))
    case .invalidSettings(let problems):
      problems.count == 1
        ? failure(problems[0], given: problems[0].value)
        : .several(problems.map { failure($0, given: $0.value) })
    case .configurationFile(let e): .usage(.configFile(e))
    case .service, .wrongPhase, .startAbandoned:
      .configuration(.directory(option: "state", path: options.judging.stateDirectory, reason: e.description))
    }
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

/// `--export-dir` as the absolute path `exportDirectory` holds (made by `exportDirectory(_:)`).
private func exportDirectoryText(_ p: ParsedArguments) -> String? {
  guard let raw = p.value("export-dir") else { return nil }
  return raw.isEmpty ? raw : URL(fileURLWithPath: raw).standardizedFileURL.path
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
