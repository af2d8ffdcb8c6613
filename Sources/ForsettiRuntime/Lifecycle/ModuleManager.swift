import ForsettiBinary
import ForsettiBridge
import ForsettiCore

/// The module table and the one lifecycle of its modules: load → identity and UI → start, in
/// provider-first order; supervision of what runs; reload; converging on what should run; stop
/// in reverse. One module's failure is recorded against it and never stops others. The manager
/// holds the table and the parts, each a type given what it needs: starting (`ModuleStarter`;
/// isolated through `IsolatedActivation`, which hands Isolation's `IsolatedStarter` the workers
/// of `WorkerSupply`), stopping (`ModuleStopper`), supervision (`Supervision`, restarts and
/// quarantine in `RestartSchedule`), reload (`Reload`), converging (`Reconciler`) and the state
/// files (`RuntimeStatePublisher`). The parts change modules only through the table's slots,
/// reached by `SlotHandle`, and never see the manager: a new part is a type given what it needs,
/// not more members here. The manager's own members are the host's way in (`LiveHost`, the
/// facade, the bench), each handing the call to its part.
///
/// Used from one thread (the host's main thread): module `start` and `stop` are called there, as
/// forsetti.h promises, and the parts share the table without a lock.
package final class ModuleManager {
  package let environment: HostEnvironment
  package let mode: ExecutionMode
  let table: ModuleTable
  /// Where workers report their exits, from their reader threads.
  let inbox: SupervisorInbox
  /// The isolated mode's workers; nil in-process.
  let workers: WorkerSupply?
  let stateFiles: RuntimeStatePublisher
  let starter: ModuleStarter
  let stopper: ModuleStopper
  let supervision: Supervision
  let reconciler: Reconciler
  /// Workers handed over by the image before this one, until the first round serves them.
  let adoption = WorkerHandoff.Pending()

  package init(
    environment: HostEnvironment, loader: any ModuleLoading = DynamicLoader(),
    mode: ExecutionMode = .inProcess
  ) {
    self.environment = environment
    self.mode = mode
    let settings: IsolationSettings? = if case .isolated(let s) = mode { s } else { nil }
    let table = ModuleTable()
    let inbox = SupervisorInbox()
    let quarantine = QuarantineStore(stateDirectory: environment.stateDirectory)
    let workers = settings.map { WorkerSupply(settings: $0, environment: environment) }
    let stateFiles = RuntimeStatePublisher(table: table, environment: environment)
    let restarts = RestartSchedule(
      table: table, environment: environment, settings: settings, quarantine: quarantine)
    let isolated = workers.map {
      IsolatedActivation(
        settings: $0.settings, table: table, environment: environment, workers: $0, inbox: inbox,
        restarts: restarts)
    }
    let starter = ModuleStarter(
      table: table, environment: environment, loader: loader, quarantine: quarantine, isolated: isolated)
    let stopper = ModuleStopper(
      table: table, environment: environment, workers: workers, stateFiles: stateFiles)
    self.table = table
    self.inbox = inbox
    self.workers = workers
    self.stateFiles = stateFiles
    self.starter = starter
    self.stopper = stopper
    supervision = Supervision(
      table: table, environment: environment, inbox: inbox, restarts: restarts, starter: starter,
      workers: workers, stateFiles: stateFiles)
    reconciler = Reconciler(
      table: table, environment: environment, starter: starter, stopper: stopper,
      reload: Reload(table: table, environment: environment, starter: starter, stopper: stopper),
      workers: workers, stateFiles: stateFiles, adoption: adoption, inbox: inbox)
  }

  /// Everything the host knows about each module, in the order their files were judged.
  package var records: [ModuleRecord] { table.records }

  /// The composed UI surface of the started modules.
  package var surface: Surface { table.surface }

  /// The state directory the host holds by identity: `runtime.json` and `surface.json` go into
  /// it, never into another directory put at its path (nil: written by path).
  package var stateDirectoryHold: StateDirectoryHold? {
    get { stateFiles.hold }
    set { stateFiles.hold = newValue }
  }

  /// Load every binary from a content-named copy under `STATE/versions/` (hot reload needs the
  /// old version after the file is replaced, and a fresh path so the loader maps the new one).
  package var versionCopies: Bool {
    get { starter.versionCopies }
    set { starter.versionCopies = newValue }
  }

  /// Keep one worker process started ahead of need (isolated mode), so that a reload or a
  /// restart does not wait for a process to start (`dev` turns it on).
  package var keepsSpareWorker: Bool {
    get { workers?.keepsSpare ?? false }
    set { workers?.keepsSpare = newValue }
  }

  /// Called (from any thread) when supervision has work: a worker exited. The host's loop uses
  /// it to wake and then calls `superviseOnce()` on the main thread.
  package func onSupervisionNeeded(_ wake: @escaping @Sendable () -> Void) { inbox.setWake(wake) }

  /// Takes the gate stack's judgements, then loads and starts every module that passed.
  package func activate(_ judgements: [ModuleJudgement], index: BinaryIndex) {
    starter.index = index
    table.removeAll()
    for j in judgements { table.append(ModuleSlot(ModuleRecord(judgement: j))) }
    starter.start(table.handles.filter { table[$0].record.state == .gated })
    persist()
    workers?.refill()
  }

  /// Serves these workers, handed over by the image of the host before this one, at once (as
  /// they were bound), and keeps them instead of starting their modules in the first round
  /// (`reconcile`) — those its verdicts still start with the same grant, roles and binary; the
  /// others are stopped then, with the reason. An image running modules in its own process
  /// ends them.
  package func adopt(_ handed: HandedModules) {
    guard let workers else {
      WorkerHandoff.end(handed.workers, handed.channels, environment: environment)
      return
    }
    let entered = WorkerHandoff(table: table, environment: environment, workers: workers, inbox: inbox).enter(
      handed.workers, channels: handed.channels)
    adoption.set(.init(workers: entered, restarts: handed.restarts))
  }

  /// Every running module's worker and the role channels between them, for a new image of the
  /// host (the workers' loop paused: nothing is being read or answered); or which module cannot
  /// be handed over, and why.
  package func handOverWorkers() -> Result<HandedModules, WorkerHandoffRefusal> {
    guard let workers else {
      guard let first = table.running.first, let id = table[first].moduleID else {
        return .success(HandedModules())
      }
      return .failure(
        WorkerHandoffRefusal(
          moduleID: id, why: "runs in the host's process (--in-process), which a new image does not keep"))
    }
    return WorkerHandoff(table: table, environment: environment, workers: workers, inbox: inbox).gather()
  }

  /// Ends the worker processes no module runs in — the zygote, the spare — before a handover to
  /// a new image of the host; `keepsSpareWorker` turns the spare on again.
  package func releaseIdleWorkers() { workers?.release() }

  /// Stops every started module, consumers before the providers they depend on
  /// (`StartOrder`, reversed), revoking each one's host functions (in-process) or ending its
  /// worker (isolated).
  package func stopAll() { stopper.stopAll() }

  /// Handles worker exits and due restarts; call on the main thread when woken. `persisting`
  /// false leaves writing the state files to the caller, which writes them once after the rest
  /// of its round (`LiveHost.process`: a reload's start then does not wait for them).
  package func superviseOnce(persisting: Bool = true) { supervision.round(persisting: persisting) }

  /// When the next restart is due, if any (the host's loop sleeps until then at most).
  package var nextRestart: ContinuousClock.Instant? { table.nextRestart }

  /// The worker process of a started isolated module.
  package func workerPID(_ moduleID: String) -> Int32? {
    table.handle(of: moduleID).flatMap { table[$0].instance?.workerPID }
  }

  /// Whether module `id` is started.
  package func isRunning(_ id: String) -> Bool { table.handle(of: id).map { table[$0].isRunning } ?? false }

  /// Converges on `desired` (`Reconciler.reconcile`): stops what is gone, no longer eligible or
  /// no longer active; reloads running modules whose version changed when `reloadsVersions`
  /// (dev; `changed` are the files the watcher reported) and restarts those whose grant changed;
  /// starts what should run. `quiet` leaves out the start lines. Returns the reloads, for `dev`
  /// to print.
  @discardableResult
  package func reconcile(
    _ desired: DesiredState, changed: Set<String> = [], reloadsVersions: Bool = false, grace: Double = 0.5,
    since: ContinuousClock.Instant = .now, quiet: Bool = false
  ) -> [ReloadReport] {
    reconciler.reconcile(
      desired, changed: changed, reloadsVersions: reloadsVersions, grace: grace, since: since, quiet: quiet)
  }

  /// Reloads `j`'s module now whatever changed (an operator asked), unless the activation state
  /// keeps it off.
  package func reloadNow(_ j: ModuleJudgement, _ desired: DesiredState, grace: Double) -> [ReloadReport] {
    reconciler.reloadNow(j, desired, grace: grace)
  }

  /// Restarts running module `id` with a new capability grant, for an embedding application.
  package func regrant(_ id: String, _ granted: Set<Capability>) { reconciler.regrant(id, granted) }

  /// Writes `runtime.json` and `surface.json` so other invocations (`list`, `surface`) can see
  /// what this host is doing.
  func persist() { stateFiles.persist() }
}
