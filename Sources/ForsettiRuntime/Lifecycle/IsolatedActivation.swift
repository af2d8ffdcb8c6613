import ForsettiCore

/// The lifecycle's half of an isolated start: it hands `IsolatedStarter` what it needs (the
/// host's workers, the inbox their exits go to, step 8 as the lifecycle judges it), then records
/// how each start ended, in module-ID order; a worker that died while starting counts as a
/// crash (`RestartSchedule`).
struct IsolatedActivation {
  let settings: IsolationSettings
  let table: ModuleTable
  let environment: HostEnvironment
  let workers: WorkerSupply
  let inbox: SupervisorInbox
  let restarts: RestartSchedule

  private var recorder: StartRecorder { StartRecorder(table: table, environment: environment) }

  /// Loads and starts isolated modules that do not depend on one another, all at once
  /// (`IsolatedStarter`), and records each one's load, identity and start.
  func run(_ activations: [Activation]) {
    let starter = IsolatedStarter(
      settings: settings, environment: environment, spareWorker: workers.spare, workerSource: workers.source,
      libraryGrants: workers.libraryGrants, libraryDirectories: workers.libraryDirectories,
      onExit: { [inbox] id, pid in inbox.post(id, pid: pid) }, sandboxMeter: workers.sandboxMeter,
      identity: { m, d, ui in IdentityVerdict(m, d, ui).result })
    let requests = activations.map { a in
      (
        tag: a.slot,
        request: IsolatedStarter.Request(
          manifest: a.manifest, path: a.path, isSwift: a.isSwift, granted: table[a.slot].record.granted,
          state: a.state)
      )
    }
    for (slot, ended) in starter.run(requests) {
      switch ended {
      case .noWorker(let why): recorder.fail(slot, .load, .loadFailed, why)
      case .ran(let s): finish(slot, s)
      }
    }
  }

  /// Records how one start ended.
  private func finish(_ i: SlotHandle, _ s: IsolatedStart) {
    let m = s.request.manifest
    if let detail = s.loadDetail { table[i].passed(.load, detail) }
    if let verdict = s.identity, !recorder.record(i, IdentityVerdict(verdict)) { return }
    switch s.outcome {
    case .started(let took):
      recorder.started(
        i, m, IsolatedInstance(worker: s.worker, stopTimeout: settings.stopTimeout), s.ui, took: took,
        detail:
          "started in worker pid \(s.worker.pid) in \(DurationText.short(took)) (spawn + confine + load + start)"
      )
    case .failed(let step, let reason, let detail, let restart):
      // A worker that died while loading or starting is a crash like any other.
      if restart != nil {
        environment.metrics.module(m.moduleID).countCrash(signal: s.worker.madeCrashReport?.signalLabel)
      }
      recorder.fail(i, step, reason, detail, crash: s.worker.madeCrashReport)
      if let restart { restarts.crashed(i, failure: restart) }
    case .identityRefused, nil:
      break
    }
  }
}
