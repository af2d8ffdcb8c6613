import ForsettiCore

/// Supervision of what runs (workers only): a worker that ended by itself (crashed, broke the
/// protocol, hung) is recorded and counted (`RestartSchedule`), and a restart that is due is
/// made, from the version that ran. Worker exits reach it through `SupervisorInbox`, from their
/// reader threads; a round runs on the main thread when the host is woken or a restart is due.
struct Supervision {
  let table: ModuleTable
  let environment: HostEnvironment
  let inbox: SupervisorInbox
  let restarts: RestartSchedule
  let starter: ModuleStarter
  let workers: WorkerSupply?
  let stateFiles: RuntimeStatePublisher

  /// Handles worker exits and due restarts. `persisting` false leaves writing the state files to
  /// the caller, which writes them once after the rest of its round (`LiveHost.process`: a
  /// reload's start then does not wait for them).
  func round(persisting: Bool) {
    for (id, pid) in inbox.drain() {
      // Matched by PID too: after a reload rollback another worker may run under the same ID.
      guard let i = table.handle(of: id), let instance = table[i].instance as? IsolatedInstance,
        instance.worker.pid == pid
      else { continue }
      ended(i, instance.worker, when: "while running")
    }
    let now = ContinuousClock.now
    for i in table.handles {
      guard let r = table[i].restart, let due = r.due, due <= now, let m = table[i].manifest else { continue }
      table[i].restartTaken()
      environment.metrics.module(m.moduleID).restarts.add(1, ordering: .relaxed)
      environment.hostLog(
        .info,
        "restarting \(m.moduleID) (crash \(r.crashes) of at most \(restarts.settings?.maxRestarts ?? 0) restarts)"
      )
      table[i].rejudged()
      // The version that ran, from its own copy under dev: the binary on disk may be a newer
      // one, refused meanwhile.
      starter.activate(slot: i, manifest: m, copy: starter.versionCopies ? table[i].record.loadedFrom : nil)
    }
    if persisting { stateFiles.persist() }
    workers?.refill()
  }

  /// A running worker ended by itself (crashed, or broke the protocol): recorded, and restarted
  /// with backoff, or quarantined. The failure, as counted.
  @discardableResult
  private func ended(_ i: SlotHandle, _ worker: WorkerProcess, when: String) -> String {
    let id = worker.moduleID
    // A violation and a hung handler count like a crash: the worker's state can no longer be
    // trusted, and restarts end in quarantine either way.
    let ending = worker.finish()
    environment.metrics.module(id).countCrash(signal: worker.madeCrashReport?.signalLabel)
    _ = table[i].release(as: .failed(ending.reason))
    let failure: String
    switch ending {
    case .violated(let v):
      environment.hostLog(
        .error, about: id, "\(ReasonCode.protocolViolation.rawValue) \(when): \(v)",
        ["reason": ReasonCode.protocolViolation.rawValue])
      failure = v.description
    case .hung:
      failure = "\(ending) \(when)"
      environment.hostLog(.error, about: id, "crashed: \(failure)")
    case .exited, .crashed:
      let tail = worker.recentLines.suffix(3).joined(separator: " | ")
      failure = "\(ending) \(when)\(worker.madeCrashReport.map { ": \($0.summary)" } ?? "")"
      environment.hostLog(
        .error, about: id, "crashed: \(failure)\(tail.isEmpty ? "" : "; last lines: \(tail)")",
        worker.madeCrashReport?.fields ?? [:])
    }
    restarts.crashed(i, failure: failure)
    return failure
  }
}
