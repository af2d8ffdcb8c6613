import CForsetti
import Dispatch
import ForsettiBinary
import ForsettiBridge
import ForsettiCore
import FoundationEssentials
import Glibc

/// One isolated module on its way from a new worker to started: what its worker said so far,
/// and how it ended. Driven by its worker's events alone, against its own deadline.
struct IsolatedStart {
  /// How the start ended, recorded once its level is done.
  enum Outcome {
    case started(took: Duration)
    /// The record's failure; `restart` the failure to count against the module (a crash or a
    /// violation), nil when it is not restarted (a refusal, a timeout).
    case failed(GateStep, ReasonCode, String, restart: String?)
    /// Already recorded: step 8 refused the module (`identity`), or no worker could be started.
    case recorded
  }

  var activation: Activation
  var worker: WorkerProcess
  var fromSpare: Bool
  let began: ContinuousClock.Instant
  /// When loading must be done by, then (from the moment `start` is sent) start: each gets the
  /// whole start timeout, so a module is not charged for others sharing the machine with it.
  var deadline: ContinuousClock.Instant
  /// When the module was loaded and judged, ready for its `start`.
  var readyAt: ContinuousClock.Instant?
  /// When its `start` was sent.
  var startSent: ContinuousClock.Instant?
  var confinedDetail = ""
  /// The load step's trace detail, once the module loaded.
  var loadDetail: String?
  var identity: IdentityVerdict?
  var ui: UIContributions?
  var outcome: Outcome?

  var step: GateStep { loadDetail == nil ? .load : .start }
}

extension ModuleManager {
  /// Loads and starts isolated modules that do not depend on one another, all at once: each
  /// in its own worker, each against its own deadline, so one that hangs or misbehaves holds
  /// nobody else to its deadline. Workers are spawned here, on the main thread (a worker's
  /// parent-death signal belongs to the thread that spawned it), and every record is written
  /// here too, in module-ID order once all are decided, so what the host reports does not
  /// depend on who was quicker.
  ///
  /// Loading is fully concurrent. `start` is released in module-ID order: a module's start is
  /// sent once every module before it in the level has returned from its own start (or failed),
  /// or has been stalled in start (or in loading) for `stagger` — so well-behaved modules keep
  /// the documented ID order (a module may message one with a smaller ID from its start, as the
  /// bundled HelloC does to the dashboard), and a hanging one costs the modules after it
  /// `stagger`, not its timeout. Loading and start each have the start timeout as their own
  /// deadline, the latter from the moment `start` is sent.
  func activateIsolated(_ activations: [Activation], _ settings: IsolationSettings) {
    let signal = DispatchSemaphore(value: 0)
    let stagger = Duration.wait(Self.stagger(settings))
    var starts: [IsolatedStart] = []
    for a in activations.sorted(by: {
      $0.manifest.moduleID.utf8.lexicographicallyPrecedes($1.manifest.moduleID.utf8)
    }) {
      guard let s = beginIsolated(a, settings) else { continue }
      s.worker.events.notify(signal)
      starts.append(s)
    }
    while true {
      var next: ContinuousClock.Instant?
      func wake(at t: ContinuousClock.Instant) { next = min(next ?? t, t) }
      for k in starts.indices where starts[k].outcome == nil {
        while starts[k].outcome == nil, let e = starts[k].worker.events.poll() {
          handle(e, &starts[k], settings, signal)
        }
        // A module waiting for release is not late: its deadline moves on when it is released.
        let waiting = starts[k].readyAt != nil && starts[k].startSent == nil
        if starts[k].outcome == nil, !waiting, ContinuousClock.now >= starts[k].deadline {
          timedOut(&starts[k], settings)
        }
      }
      // Release starts in ID order, behind any earlier module still busy within `stagger`.
      var held = false
      for k in starts.indices where starts[k].outcome == nil {
        let now = ContinuousClock.now
        if starts[k].readyAt != nil, starts[k].startSent == nil, !held {
          starts[k].deadline = now + .wait(settings.startTimeout)
          starts[k].startSent = now
          // False only if the worker broke off meanwhile: its next event says how.
          _ = starts[k].worker.start(state: starts[k].activation.state ?? [])
        }
        let busySince = starts[k].startSent ?? starts[k].began
        if now < busySince + stagger {
          held = true
          wake(at: busySince + stagger)
        }
        if starts[k].readyAt == nil || starts[k].startSent != nil { wake(at: starts[k].deadline) }
      }
      guard let next else { break }
      _ = signal.wait(timeout: .now() + .nanoseconds(WorkerEvents.nanoseconds(next - .now)))
    }
    for s in starts {
      s.worker.events.notify(nil)
      finish(s, settings)
    }
  }

  /// How long a module busy in start (or loading) holds back the next one's start in its
  /// level: a quarter of the start timeout, at most one second.
  static func stagger(_ settings: IsolationSettings) -> Double { min(1, max(0, settings.startTimeout / 4)) }

  /// A worker told its module (the spare, if one is ready), or nil after recording why none
  /// could be started.
  private func beginIsolated(_ a: Activation, _ settings: IsolationSettings) -> IsolatedStart? {
    let i = a.slot
    let sandbox = environment.sandboxPath(for: a.manifest.moduleID)
    // The worker may write only inside its sandbox, so the host creates it beforehand.
    do { _ = try SandboxStorage(root: sandbox) } catch {
      fail(i, .load, .loadFailed, error.description)
      return nil
    }
    // The module's TMPDIR (`WorkerEnvironment`); a module that removed it may make it again.
    mkdir(sandbox + "/" + WorkerEnvironment.temporaryDirectory, 0o700)
    let began = ContinuousClock.now
    var fromSpare = false
    let started: StartedWorker
    var placed: WorkerCgroup?
    if let spare = spareWorker?.take() {
      started = spare.worker
      placed = spare.cgroup
      fromSpare = true
    } else {
      guard let s = spawnWorker(a, settings) else { return nil }
      started = s
    }
    guard let worker = configure(started, a, settings, placed: placed) else { return nil }
    // From the moment the worker exists: the time the host took to get one (a stuck zygote
    // replaced, `WorkerSource`) is the host's, not the module's.
    return IsolatedStart(
      activation: a, worker: worker, fromSpare: fromSpare, began: began,
      deadline: .now + .wait(settings.startTimeout))
  }

  private var exitHandler: @Sendable (String, Int32) -> Void {
    { [inbox] id, pid in inbox.post(id, pid: pid) }
  }

  private func configuration(
    _ a: Activation, _ settings: IsolationSettings, memoryAccounted: Bool, libraries: [String]
  ) -> WorkerConfiguration {
    let sandbox = environment.sandboxPath(for: a.manifest.moduleID)
    let dir = PathText.parent(a.path)
    var readExecute = [a.path, dir, settings.workerExecutable, "/etc/ld.so.cache"] + workerLibraryDirectories
    readExecute += libraries.filter { !readExecute.contains($0) }
    let policy = ConfinementPolicy(
      readExecute: readExecute,
      readWrite: [sandbox, "/dev/null"], networking: table[a.slot].record.granted.contains(.networking),
      limits: settings.limits, memoryAccounted: memoryAccounted)
    return WorkerConfiguration(
      moduleID: a.manifest.moduleID, library: a.path, entryPoint: a.manifest.entryPoint, isSwift: a.isSwift,
      sandbox: sandbox, granted: table[a.slot].record.granted, serves: a.manifest.defaultModuleRole,
      calls: StartOrder.consumedRoles(a.manifest), policy: policy, parent: getpid(),
      environment: settings.workerEnvironment.module(
        sandbox: sandbox, host: ProcessInfo.processInfo.environment))
  }

  /// A new worker process, waiting for its configuration; nil after recording why none started.
  private func spawnWorker(_ a: Activation, _ settings: IsolationSettings) -> StartedWorker? {
    do {
      return try (workerSource ?? WorkerSource(executable: settings.workerExecutable, forks: false)).start()
    } catch {
      fail(a.slot, .load, .loadFailed, "could not start a worker: \(error)")
      return nil
    }
  }

  /// A new worker told its module: spawned, put in its cgroup, then configured.
  private func freshWorker(_ a: Activation, _ settings: IsolationSettings) -> WorkerProcess? {
    guard let started = spawnWorker(a, settings) else { return nil }
    return configure(started, a, settings)
  }

  /// Makes `started` a cgroup of its own (when the host has cgroups), which the worker joins
  /// before it is told its module (`WorkerProcess`): it has run no code of a module outside it.
  /// nil after recording why the module cannot run there.
  private func configure(
    _ started: StartedWorker, _ a: Activation, _ settings: IsolationSettings, placed: WorkerCgroup? = nil
  ) -> WorkerProcess? {
    var cgroup = placed
    let id = a.manifest.moduleID
    // The directories of the module's own libraries (its DT_NEEDED, found as the loader finds
    // them): read/execute, before the worker confines itself.
    let grants = libraryGrants.grants(for: a.path)
    if let refused = grants?.refused.first {
      started.discard()
      if let placed { WorkerProcess.release(placed) }
      fail(
        a.slot, .load, .loadFailed,
        "library \(refused.library) is in \(refused.directory), which a worker may not read: \(refused.reason); "
          + "ship it in a directory of its own (DT_RUNPATH $ORIGIN/…) or a system library directory")
      return nil
    }
    if let placed {
      // A spare's cgroup was made before its module was known: the module's CPU share now.
      do {
        try placed.setCPU(weight: settings.cpu.weight(for: id), maxPercent: settings.cpu.maxPercent(for: id))
      } catch {
        started.discard()
        WorkerProcess.release(placed)
        fail(a.slot, .load, .loadFailed, "could not give the worker its CPU share: \(error)")
        return nil
      }
    } else if case .success(let cgroups) = HostCgroups.workerCgroups {
      do {
        cgroup = try cgroups.create(moduleID: id, limits: HostCgroups.limits(id, settings))
      } catch {
        started.discard()
        fail(a.slot, .load, .loadFailed, "could not make the worker a cgroup of its own: \(error)")
        return nil
      }
    }
    return WorkerProcess(
      started,
      configuration: configuration(
        a, settings, memoryAccounted: cgroup != nil, libraries: grants?.granted ?? []),
      cgroup: cgroup,
      joined: placed != nil, environment: environment, onExit: exitHandler)
  }

  /// Moves one start on by one event from its worker (read by `WorkerProcess.startStep`).
  private func handle(
    _ e: WorkerEvent, _ s: inout IsolatedStart, _ settings: IsolationSettings, _ signal: DispatchSemaphore
  ) {
    if case .frame(let f) = e { return handle(f, &s) }
    let progress = WorkerStartProgress(
      fromSpare: s.fromSpare, confined: !s.confinedDetail.isEmpty, loaded: s.loadDetail != nil,
      startSent: s.startSent != nil)
    switch s.worker.startStep(after: e, progress) {
    case .failed(let step, let reason, let detail, let restart):
      s.outcome = .failed(step, reason, detail, restart: restart)
    case .spareLost:
      s.fromSpare = false
      guard let w = freshWorker(s.activation, settings) else {
        s.outcome = .recorded
        return
      }
      w.events.notify(signal)
      s.worker = w
    case .confined, .loaded, .started, .nothing:
      break
    }
  }

  private func handle(_ f: WireFrame, _ s: inout IsolatedStart) {
    let progress = WorkerStartProgress(
      fromSpare: s.fromSpare, confined: !s.confinedDetail.isEmpty, loaded: s.loadDetail != nil,
      startSent: s.startSent != nil)
    switch s.worker.startStep(after: f, progress) {
    case .confined(let summary):
      s.confinedDetail = summary
    case .loaded(let descriptor, let ui):
      s.loadDetail = "loaded \(s.activation.path) in worker pid \(s.worker.pid) (\(s.confinedDetail))"
      let verdict = Self.identityAndUI(s.activation.manifest, descriptor, ui)
      s.identity = verdict
      s.ui = ui
      if case .fail = verdict {
        s.worker.end()
        s.outcome = .recorded
        return
      }
      s.readyAt = ContinuousClock.now
    case .started:
      s.outcome = .started(took: ContinuousClock.now - s.began)
    case .failed(let step, let reason, let detail, let restart):
      s.outcome = .failed(step, reason, detail, restart: restart)
    case .spareLost, .nothing:
      break
    }
  }

  private func timedOut(_ s: inout IsolatedStart, _ settings: IsolationSettings) {
    let progress = WorkerStartProgress(
      fromSpare: s.fromSpare, confined: !s.confinedDetail.isEmpty, loaded: s.loadDetail != nil,
      startSent: s.startSent != nil)
    if case .failed(let step, let reason, let detail, let restart) = s.worker.startTimedOut(
      progress, after: settings.startTimeout)
    {
      s.outcome = .failed(step, reason, detail, restart: restart)
    }
  }

  /// Records how one start ended.
  private func finish(_ s: IsolatedStart, _ settings: IsolationSettings) {
    let i = s.activation.slot
    let m = s.activation.manifest
    if let detail = s.loadDetail { table[i].passed(.load, detail) }
    if let verdict = s.identity, !record(i, verdict) { return }
    switch s.outcome {
    case .started(let took):
      markStarted(
        i, m, IsolatedInstance(worker: s.worker, stopTimeout: settings.stopTimeout), s.ui, took: took,
        detail:
          "started in worker pid \(s.worker.pid) in \(Self.formatted(took)) (spawn + confine + load + start)")
    case .failed(let step, let reason, let detail, let restart):
      fail(i, step, reason, detail)
      if let restart { scheduleRestart(i, failure: restart) }
    case .recorded, nil:
      break
    }
  }
}
