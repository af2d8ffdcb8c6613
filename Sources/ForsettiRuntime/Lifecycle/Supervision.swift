import ForsettiBinary
import ForsettiBridge
import ForsettiCore
import Synchronization

/// Worker exits reported from their reader threads, for the main thread to handle.
final class SupervisorInbox: Sendable {
  private let exited = Mutex<[(moduleID: String, pid: Int32)]>([])
  private let wake = Mutex<(@Sendable () -> Void)?>(nil)

  func setWake(_ w: @escaping @Sendable () -> Void) { wake.withLock { $0 = w } }

  func post(_ moduleID: String, pid: Int32) {
    exited.withLock { $0.append((moduleID, pid)) }
    wake.withLock { $0 }?()
  }

  func drain() -> [(moduleID: String, pid: Int32)] {
    exited.withLock { e in
      defer { e.removeAll() }; return e
    }
  }
}

extension ModuleManager {
  /// When the next restart is due, if any (the host's loop sleeps until then at most).
  package var nextRestart: ContinuousClock.Instant? { table.slots.compactMap { $0.restart?.due }.min() }

  /// The worker process of a started isolated module.
  package func workerPID(_ moduleID: String) -> Int32? {
    table.handle(of: moduleID).flatMap { table[$0].instance?.workerPID }
  }

  func quarantined(_ moduleID: String, path: String) -> String? {
    guard let e = quarantine.load()[moduleID] else { return nil }
    if e.path == path, let now = BinaryIdentity.of(path), now == e.identity {
      return
        "quarantined after \(e.crashes) crashes (last: \(e.lastFailure)); rebuild or replace \(path) to lift it"
    }
    // Only the entry judged here is lifted, not one written meanwhile for another binary.
    try? quarantine.update { if $0[moduleID] == e { $0[moduleID] = nil } }
    environment.hostLog(.info, "quarantine of \(moduleID) lifted: \(path) changed", subject: moduleID)
    return nil
  }

  /// Handles worker exits and due restarts; call on the main thread when woken.
  package func superviseOnce() { superviseOnce(persisting: true) }

  /// `persisting` false leaves writing the state files to the caller, which writes them once
  /// after the rest of its round (`LiveHost.process`: a reload's start then does not wait for
  /// them).
  func superviseOnce(persisting: Bool) {
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
        "restarting \(m.moduleID) (crash \(r.crashes) of at most \(isolation?.maxRestarts ?? 0) restarts)")
      table[i].rejudged()
      // The version that ran, from its own copy under dev: the binary on disk may be a newer
      // one, refused meanwhile.
      activate(slot: i, manifest: m, copy: versionCopies ? table[i].record.loadedFrom : nil)
    }
    if persisting { persist() }
    refillSpareWorker()
  }

  /// A running worker ended by itself (crashed, or broke the protocol): recorded, and restarted
  /// with backoff, or quarantined. The failure, as counted.
  @discardableResult
  func ended(_ i: SlotHandle, _ worker: WorkerProcess, when: String) -> String {
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
    scheduleRestart(i, failure: failure)
    return failure
  }

  func scheduleRestart(_ i: SlotHandle, failure: String) {
    guard let settings = isolation, let m = table[i].manifest else { return }
    let crashes = (table[i].restart?.crashes ?? 0) + 1
    if crashes > settings.maxRestarts {
      table[i].forgetRestarts()
      table[i].held(.failed(.quarantined))
      environment.metrics.module(m.moduleID).quarantines.add(1, ordering: .relaxed)
      if let path = table[i].record.binaryPath, let identity = BinaryIdentity.of(path) {
        try? quarantine.update {
          $0[m.moduleID] = .init(path: path, identity: identity, crashes: crashes, lastFailure: failure)
        }
      }
      environment.hostLog(
        .error, about: m.moduleID,
        "\(ReasonCode.quarantined.rawValue): \(crashes) crashes; not restarted until its binary changes",
        reason: .quarantined)
      return
    }
    let delay = settings.backoffBase * Double(1 << min(crashes - 1, 30))
    table[i].willRestart(crashes: crashes, due: .now + .wait(delay), failure: failure)
    environment.hostLog(.info, "will restart \(m.moduleID) in \(delay) s", subject: m.moduleID)
  }
}
