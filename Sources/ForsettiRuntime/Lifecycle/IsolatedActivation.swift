import ForsettiCore

/// The lifecycle's half of an isolated start: it hands `IsolatedStarter` what it needs, then
/// records how each start ended, in module-ID order.
extension ModuleManager {
  /// Loads and starts isolated modules that do not depend on one another, all at once
  /// (`IsolatedStarter`), and records each one's load, identity and start.
  func activateIsolated(_ activations: [Activation], _ settings: IsolationSettings) {
    let starter = IsolatedStarter(
      settings: settings, environment: environment, spareWorker: spareWorker, workerSource: workerSource,
      libraryGrants: libraryGrants, libraryDirectories: workerLibraryDirectories,
      onExit: { [inbox] id, pid in inbox.post(id, pid: pid) }, sandboxMeter: sandboxMeter,
      identity: { m, d, ui in Self.identityAndUI(m, d, ui).result })
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
      case .noWorker(let why): fail(slot, .load, .loadFailed, why)
      case .ran(let s): finish(slot, s, settings)
      }
    }
  }

  /// Records how one start ended.
  private func finish(_ i: SlotHandle, _ s: IsolatedStart, _ settings: IsolationSettings) {
    let m = s.request.manifest
    if let detail = s.loadDetail { table[i].passed(.load, detail) }
    if let verdict = s.identity, !record(i, IdentityVerdict(verdict)) { return }
    switch s.outcome {
    case .started(let took):
      markStarted(
        i, m, IsolatedInstance(worker: s.worker, stopTimeout: settings.stopTimeout), s.ui, took: took,
        detail:
          "started in worker pid \(s.worker.pid) in \(Self.formatted(took)) (spawn + confine + load + start)")
    case .failed(let step, let reason, let detail, let restart):
      // A worker that died while loading or starting is a crash like any other.
      if restart != nil {
        environment.metrics.module(m.moduleID).countCrash(signal: s.worker.madeCrashReport?.signalLabel)
      }
      fail(i, step, reason, detail, crash: s.worker.madeCrashReport)
      if let restart { scheduleRestart(i, failure: restart) }
    case .identityRefused, nil:
      break
    }
  }
}
