import CForsettiSys
import ForsettiCore
import ForsettiRuntime
import FoundationEssentials
import Glibc
import Synchronization

/// A host as a value: it holds its state directory, judges and starts modules, converges on
/// every change, answers its control socket, and stops them in reverse order. The command
/// line's `run` and `dev` are clients of it; so is an application that embeds the host.
///
/// Threads. The thread that calls `start` is the host's thread: modules' `start` and `stop`
/// run on it, and the lifecycle is kept there without locks, so `register`, `start`, `run`,
/// `process`, `nextDue` and `stop` must all come from it (`init` may come from any thread, as
/// long as the host then stays on one). `requestStop`, `call`, `observe`, `observeReloads`,
/// `modules`, `ask` and `controlSocketPath` are safe from any thread. Observers are called on the
/// host's thread, from `start`, `run` or `process`; they must not call the host's-thread methods.
///
/// `@unchecked Sendable`: the any-thread members reach only `Mutex`-guarded or `Atomic` state
/// and `Sendable` runtime objects; everything else is confined to the host's thread by the rule
/// above, which the type system cannot state.
public final class ForsettiHost: @unchecked Sendable {
  private let configuration: Configuration
  private let hold: StateDirectoryHold
  /// Released (nil) when the host stops: another host may then take the directory.
  private var lock: HostLock?
  private let waiter = SignalWaiter()
  private let applicationServices = ApplicationServices()
  private let changeObservers = ObserverList<HostChange>()
  private let reloadObservers = ObserverList<ReloadReport>()
  private let stopRequested = Atomic<Bool>(false)
  private let phase = Mutex(Phase.configured)
  /// What `call` and `ask` use from other threads, set once `start` made them.
  private let shared = Mutex(Shared())
  /// Host's thread only.
  private var live: LiveHost?
  /// The control plane's answers, from `live`'s own state (its judge with the in-memory
  /// overrides, its records, the health modules report); made on the host's thread.
  private var controlAnswerer: ControlAnswerer?
  private var server: ControlServer?
  /// `/metrics`, when the configuration asks for it; stopped with the host.
  private let metricsServer = Mutex<MetricsServer?>(nil)
  /// `upgrade`, for a host the command line runs (`Configuration.upgradeArguments`).
  private var upgrade: HostUpgrade?

  private enum Phase: String {
    case configured, starting, started, stopped
  }

  private struct Shared {
    var environment: HostEnvironment?
    var server: ControlServer?
    var records: [ModuleRecord] = []
  }

  /// Why `run` returned.
  public enum Ending: Sendable, Equatable {
    /// SIGINT or SIGTERM, by name.
    case signal(String)
    /// `run`'s deadline came.
    case deadline
    /// `requestStop` was called.
    case stopRequested
    /// The state directory was moved away or replaced under the host: it touches nothing at the
    /// path any more (another host may start on what is there).
    case stateDirectoryReplaced
  }

  /// Holds and locks the state directory (creating it if missing): one host per directory.
  public init(_ configuration: Configuration) throws(ForsettiHostError) {
    let state = configuration.judging.stateDirectory
    if let worker = configuration.isolation?.workerExecutable, let why = ExecutableReach.problem(worker) {
      throw .workerMissing(path: worker, reason: why)
    }
    _ = try configuration.validated()
    self.configuration = configuration
    // Held by identity: the lock, the logs and runtime.json go into the directory opened here,
    // whatever is put at its path later (StateDirectoryHold).
    if let handover = configuration.handover {
      // This process's previous image held and locked the directory; they are this one's now.
      do { hold = try StateDirectoryHold(adopting: handover.holdFD, path: handover.stateDirectory) } catch {
        throw .stateDirectoryUnusable(path: state, reason: error.description)
      }
      lock = HostLock(adopting: handover.lockFD, path: PathText.join(hold.path, "host.lock"))
      return
    }
    try? FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
    do { hold = try StateDirectoryHold(path: state) } catch {
      throw .stateDirectoryUnusable(path: state, reason: error.description)
    }
    do { lock = try HostLock(in: hold) } catch {
      hold.stop()
      var holder: Int32?
      if case .held(let pid, _) = error { holder = pid }
      throw .stateDirectoryLocked(path: state, holder: holder, reason: error.description)
    }
  }

  /// A host dropped without `stop` stops here, so no module outlives it.
  deinit { stop(because: "the host was released") }

  /// Offers `service` to modules (behind its capability); before `start` only.
  public func register(_ service: ApplicationService) throws(ForsettiHostError) {
    let now = phase.withLock { $0 }
    guard now == .configured else { throw .wrongPhase(call: "register", phase: now.rawValue) }
    do { try applicationServices.register(service) } catch { throw .service(id: service.id, error) }
  }

  /// Calls `observer` with each module whose state changed and each change of the UI surface.
  public func observe(_ observer: @escaping @Sendable (HostChange) -> Void) {
    changeObservers.add(observer)
  }

  /// Calls `observer` with each reload (`development`, or a control socket's `reload`).
  public func observeReloads(_ observer: @escaping @Sendable (ReloadReport) -> Void) {
    reloadObservers.add(observer)
  }

  /// Judges every module and starts those that pass every gate and are active, then opens the
  /// control socket. A judging failure stops what started and releases the state directory.
  /// `askingApproval` is called once, on this thread, with the manifests found — after the
  /// approvals of modules that now request less were shrunk, before approvals are read — so an
  /// interactive prompt may approve there what the first judgement then grants; false from it
  /// ends the start before any module starts (`.startAbandoned`). With `catchesSignalsAtStart`,
  /// SIGINT and SIGTERM are the host's from just after it (a prompt's Ctrl-C stays the user's).
  public func start(askingApproval: ([ModuleManifest]) -> Bool = { _ in true }) throws(ForsettiHostError) {
    let before = phase.withLock { p in
      defer { if p == .configured { p = .starting } }
      return p
    }
    guard before == .configured else { throw .wrongPhase(call: "start", phase: before.rawValue) }
    let state = configuration.judging.stateDirectory
    // What this image is (its version, the host's start, its upgrades): one value, made once,
    // that `status` and `/metrics` both say.
    let origin = HostUpgrade.origin(handedOver: configuration.handover)
    let environment = makeEnvironment()
    let manager = makeManager(environment)
    if let h = configuration.handover {
      manager.adopt(HandedModules(workers: h.workers, channels: h.channels, restarts: h.restarts))
    }
    hold.whenReplaced { [waker = waiter.waker] _ in waker() }
    let live = LiveHost(
      judge: Judge(Self.remembering(configuration.judging, handedOver: configuration.handover)),
      manager: manager,
      development: configuration.development,
      wake: waiter.waker)
    live.onReload = reloadObservers.tell
    live.onChange = changeObservers.tell
    self.live = live
    shared.withLock { $0.environment = environment }
    // Bound before any module starts: a taken port is exit 2 at once, not after every module
    // started and stopped again.
    if configuration.metricsAddress == nil, let kept = configuration.handover?.metricsFD { close(kept) }
    if let address = configuration.metricsAddress {
      do {
        try serveMetrics(address, environment, image: origin, listening: configuration.handover?.metricsFD)
      } catch {
        manager.stopAll()
        finish()
        throw error
      }
    }
    let catchesSignals = configuration.catchesSignalsAtStart
    let proceeded: Bool
    do {
      proceeded = try live.start(watching: configuration.watchesChanges) { [waiter] manifests in
        let go = askingApproval(manifests)
        if go && catchesSignals { waiter.catchSignals() }
        return go
      }
    } catch {
      manager.stopAll()
      finish()
      throw .judging(error)
    }
    guard proceeded else {
      manager.stopAll()
      finish()
      throw .startAbandoned
    }
    warnUnknownCPUModules(manager)
    // The control socket is made at the path: not once the path names another directory.
    if let listening = configuration.handover?.controlFD {
      server = ControlServer(adopting: listening, stateDirectory: state, wake: waiter.waker)
    } else if configuration.controlSocket && hold.check() == nil {
      do { server = try ControlServer(stateDirectory: state, wake: waiter.waker) } catch {
        live.stop()
        finish()
        throw .controlSocket(path: PathText.join(state.isEmpty ? "." : state, "control.sock"), error)
      }
    }
    shared.withLock {
      $0.server = server
      $0.records = manager.records
    }

    if let arguments = configuration.upgradeArguments, let lock {
      upgrade = HostUpgrade(
        arguments: arguments, hold: hold, lockFD: lock.descriptor, origin: origin)
    }
    if let h = configuration.handover {
      // The previous image blocked these across the exec; a signal sent meanwhile is delivered
      // now, to this image's handlers.
      forsetti_unblock_stop_signals()
      environment.hostLog(
        .info,
        "upgrade: this host (pid \(getpid())) now runs \(h.executable), version \(ForsettiVersion.current) (was \(h.fromVersion)); \(h.upgrades) upgrade\(h.upgrades == 1 ? "" : "s") since it started"
      )
    }
    phase.withLock { $0 = .started }
    // Ready once the control socket answers: a unit's ExecStartPost= may ask the host at once.
    let running = manager.records.filter { $0.state == .started }.count
    ServiceNotifier.ready(status: "\(running) of \(manager.records.count) modules running")
  }

  /// The judging configuration of a running host: it remembers its policy file, so an invalid
  /// one edited into place is reported and the last valid one stays in force (`PolicyMemory`).
  /// An upgraded image's judge starts with the in-memory overrides its previous image had.
  private static func remembering(_ judging: HostConfiguration, handedOver: Handover?) -> HostConfiguration {
    var c = judging
    if c.policyMemory == nil { c.policyMemory = PolicyMemory() }
    if let h = handedOver {
      c.inMemoryOverrides = InMemoryOverrides(modules: h.overriddenModules, products: h.overriddenProducts)
    }
    return c
  }

  /// Starts `/metrics` at `address`, rendered at each scrape from the counters, the records
  /// of the last round and `image` (this image's version and upgrades); says where in the
  /// host's log.
  /// With `listening`, on that socket (kept across an upgrade), which is closed if it is not
  /// bound to `address` (the configuration changed meanwhile) or cannot be served.
  private func serveMetrics(
    _ address: MetricsAddress, _ environment: HostEnvironment, image: StatusAnswer.Image,
    listening: Int32? = nil
  ) throws(ForsettiHostError) {
    let metrics = environment.metrics
    let made: MetricsServer
    var kept = listening
    if let fd = kept, !address.isBound(to: fd) {
      close(fd)
      kept = nil
    }
    let render: @Sendable () -> String = { [weak self] in
      MetricsExposition.render(metrics, records: self?.modules ?? [], image: image)
    }
    do {
      made = try MetricsServer(address, listening: kept, render: render)
    } catch {
      guard let fd = kept else { throw .metrics(address: address.description, reason: error.description) }
      // The kept socket could not be served: closed, and the address bound anew.
      close(fd)
      do { made = try MetricsServer(address, render: render) } catch {
        throw .metrics(address: address.description, reason: error.description)
      }
    }
    metricsServer.withLock { $0 = made }
    environment.hostLog(.info, "metrics: \(made.url)")
    if !made.address.isLoopback {
      environment.hostLog(
        .warning,
        "metrics: \(made.address) is not a loopback address: anyone who can reach it reads every module's counters "
          + "(no authentication); serve on 127.0.0.1 or ::1 and scrape through a proxy, or firewall the port")
    }
  }

  /// Where `/metrics` is served (`http://ADDRESS:PORT/metrics`, the real port when 0 was asked
  /// for); nil when not served.
  public var metricsURL: String? { metricsServer.withLock { $0?.url } }

  /// The environment every module shares, its log going to the configured sinks and to
  /// `STATE/logs/host.log`.
  private func makeEnvironment() -> HostEnvironment {
    _ = mkdirat(hold.fd, "logs", 0o755)
    var sinks = configuration.logSinks
    if let file = FileLogSink(path: hold.within("logs/host.log"), rotation: configuration.logLimits.rotation)
    {
      sinks.append(file)
    }
    let environment = HostEnvironment(
      stateDirectory: configuration.judging.stateDirectory, log: FanOutLogSink(sinks),
      limits: configuration.logLimits, exportDirectory: configuration.exportDirectory,
      quotas: configuration.quotas, applicationServices: applicationServices,
      loop: WorkerLoop(
        baseThreads: configuration.servingThreads.base, maxThreads: configuration.servingThreads.max))
    if let exportDirectory = configuration.exportDirectory {
      environment.hostLog(
        .info, "file export: modules granted file_export write into \(exportDirectory)/<module ID>/")
    }
    return environment
  }

  private func makeManager(_ environment: HostEnvironment) -> ModuleManager {
    let mode = configuration.isolation.map(ExecutionMode.isolated) ?? .inProcess
    let manager = ModuleManager(environment: environment, mode: mode)
    manager.stateDirectoryHold = hold
    // From a copy always (in memory in-process, under STATE/versions/ for a worker): `reload ID`
    // (and dev) may replace the file while the loaded version must stay reachable for a rollback.
    manager.versionCopies = true
    manager.keepsSpareWorker = configuration.development != nil
    if let settings = configuration.isolation {
      environment.hostLog(.info, "isolation: \(IsolationSettings.kernelSupport())")
      environment.hostLog(.info, "cgroups: \(HostCgroups.support(cpu: settings.cpu))")
      environment.hostLog(.info, "disk: \(settings.diskBounds)")
    }
    return manager
  }

  /// A module ID mistyped in the CPU shares would otherwise go unnoticed.
  private func warnUnknownCPUModules(_ manager: ModuleManager) {
    guard let settings = configuration.isolation else { return }
    let found = Set(manager.records.compactMap(\.moduleID))
    for id in settings.cpu.namedModules.subtracting(found).sorted() {
      manager.environment.hostLog(
        .warning,
        "cpu: --cpu-weight or --cpu-max names \(id), which is no module found at start (a typo?); "
          + "it applies if that module appears")
    }
  }

  /// Every module the host knows, blocked ones included, as of the last round.
  public var modules: [ModuleRecord] { shared.withLock { $0.records } }

  /// Calls `method` of the module serving `role`, as the application (`applicationID`), with the
  /// deadlines and errors of a module's call; `FORSETTI_ERR_UNAVAILABLE` before `start`.
  public func call(role: DefaultModuleRole, method: String, request: [UInt8]) -> ModuleCallReply {
    guard let environment = shared.withLock({ $0.environment }) else {
      return ModuleCallReply(status: FORSETTI_ERR_UNAVAILABLE, response: [])
    }
    return environment.services.callRole(
      role, method: method, request: request, from: configuration.applicationID)
  }

  /// Converges on every change until `deadline`, a signal (with `handlingSignals`: SIGINT or
  /// SIGTERM, a second one exits the process at once), `requestStop`, or the state directory
  /// replaced. Returns at once, `.stopRequested`, on a host not started or already stopped.
  public func run(until deadline: ContinuousClock.Instant? = nil, handlingSignals: Bool = true) -> Ending {
    guard phase.withLock({ $0 }) == .started else { return .stopRequested }
    if handlingSignals { waiter.catchSignals() }
    while true {
      // Each round looks at the path too: the watch misses an ancestor reached through a link.
      if let r = hold.check() {
        // Acting on the directory now at the path would be acting on another host's (its
        // runtime.json, its socket) or on one an operator put there for a new host; this host's
        // modules stop, and a service manager restarts a host on what is really there.
        shared.withLock { $0.environment }?.hostLog(
          .error,
          "\(hold.describe(r)); this host stops, and touches nothing at \(hold.path); a new host may start on the directory now there"
        )
        return .stateDirectoryReplaced
      }
      if stopRequested.load(ordering: .acquiring) { return .stopRequested }
      if let deadline, ContinuousClock.now >= deadline { return .deadline }
      let until = [deadline, nextDue].compactMap { $0 }.min()
      if let signal = waiter.wait(until: until), handlingSignals { return .signal(signal) }
      process()
    }
  }

  /// When the host next wants `process` without anything waking it (a restart, a licence or
  /// override window's edge, file changes settling); nil: only when woken.
  public var nextDue: ContinuousClock.Instant? { live?.nextDue }

  /// A descriptor that becomes readable when the host has work for `process` (a worker exited,
  /// a file changed, a control request waits, a stop was requested): an application's own loop
  /// polls it for reading, with `nextDue` as its timeout, and calls `process` when either comes.
  /// `process` empties it; the host owns it (never close it). Any thread.
  public var wakeDescriptor: Int32 { waiter.descriptor }

  /// One round, for an application's own loop: worker exits and restarts, a change judged and
  /// converged on, the control requests waiting answered.
  public func process() {
    guard let live else { return }
    // Before the work, so a wake-up during it leaves the descriptor readable for the next round.
    waiter.drain()
    live.process()
    server?.serve(answerer(live).answer)
    shared.withLock { $0.records = live.manager.records }
    handOverIfAsked(live)
  }

  private func answerer(_ live: LiveHost) -> ControlAnswerer {
    if let made = controlAnswerer { return made }
    let made = ControlAnswerer(host: live, pid: getpid())
    if let upgrade {
      made.image = { upgrade.image }
      made.upgrade = {
        [server, fixed = configuration.upgradeRefusal] () throws(ControlFailure) -> UpgradeAnswer in
        try upgrade.prepare(refusal: fixed ?? Self.upgradeRefusal(live), server: server)
      }
    }
    controlAnswerer = made
    return made
  }

  /// Why this host cannot be handed over to a new image now, if it cannot: what it would lose.
  private static func upgradeRefusal(_ live: LiveHost) -> String? {
    let running = live.manager.records.filter { $0.state == .started }.compactMap(\.moduleID)
    if case .inProcess = live.manager.mode, !running.isEmpty {
      let shown = running.prefix(5).joined(separator: ", ") + (running.count > 5 ? ", …" : "")
      return
        "modules run in the host's process (\(shown)), which a new image does not keep; restart the host instead"
    }
    return nil
  }

  /// Becomes the new image when `upgrade` was answered this round; back here only if it did not.
  private func handOverIfAsked(_ live: LiveHost) {
    guard let upgrade else { return }
    let environment = live.manager.environment
    upgrade.handOver(
      server: server, loop: environment.loop, workers: { live.manager.handOverWorkers() },
      overrides: { live.judge.configuration.inMemoryOverrides.snapshot },
      stopping: { self.waiter.signalled || self.stopRequested.load(ordering: .acquiring) },
      log: { environment.hostLog($0, $1) },
      release: {
        live.manager.releaseIdleWorkers()
        return metricsServer.withLock { server -> Int32? in
          defer { server = nil }
          return server?.handOver()
        }
      },
      resume: { kept in
        live.manager.keepsSpareWorker = configuration.development != nil
        guard let address = configuration.metricsAddress else {
          if let kept { close(kept) }
          return
        }
        do { try serveMetrics(address, environment, image: upgrade.origin, listening: kept) } catch {
          environment.hostLog(
            .error, "metrics: not served again after the upgrade that did not happen: \(error)")
        }
      })
  }

  /// Asks this host as a control client would (from a thread of the application's, such as a
  /// debug page's): waits until the host's thread has answered. Without a control socket, a
  /// refusal.
  public func ask(_ request: ControlRequest) -> ControlResponse {
    guard let server = shared.withLock({ $0.server }) else {
      return ControlResponse(
        pid: getpid(), stateDirectory: configuration.judging.stateDirectory,
        outcome: .failed(ControlFailure(.refused, "this host has no control socket")))
    }
    return server.ask(request)
  }

  /// `STATE/control.sock` while this host answers it; nil before `start`, without one, or after
  /// `stop`.
  public var controlSocketPath: String? { shared.withLock { $0.server?.path } }

  /// Makes `run` return `.stopRequested` soon; from any thread. The modules stop in `stop`.
  public func requestStop() {
    stopRequested.store(true, ordering: .releasing)
    waiter.waker()
  }

  /// Stops every module, last started first, removes the control socket and releases the state
  /// directory; `reason` goes into the host's log line. Idempotent.
  public func stop(because reason: String? = nil) {
    let before = phase.withLock { p in
      defer { p = .stopped }
      return p
    }
    guard before != .stopped else { return }
    let environment = shared.withLock { $0.environment }
    environment?.hostLog(.info, "stopping all modules (\(reason ?? "stop requested"))")
    if live != nil { ServiceNotifier.stopping() }
    // ControlServer.stop unlinks control.sock by path: at a replaced path that is another
    // host's socket. This host's own is removed in the directory it holds (no other host can
    // have made one there: this one holds its lock); a client waiting on it reads the end of
    // the connection when the host exits.
    if hold.check() == nil {
      server?.stop()
    } else if server != nil {
      _ = unlinkat(hold.fd, "control.sock", 0)
    }
    // Its watch ends now, not after the modules: closing an inotify descriptor waits for the
    // kernel (an RCU grace period, 10–20 ms here), which then passes while modules stop, beside
    // the closing of the file watchers' own.
    hold.stop()
    live?.stop()
    finish()
    // Counts of lines dropped by the rate limit are written before the caller's summary.
    environment?.limiter.flush()
  }

  /// Releases what the host holds, after its modules stopped.
  private func finish() {
    metricsServer.withLock {
      $0?.stop()
      $0 = nil
    }
    if let live { shared.withLock { $0.records = live.manager.records } }
    shared.withLock { $0.server = nil }
    hold.stop()
    lock = nil
    phase.withLock { $0 = .stopped }
  }
}
