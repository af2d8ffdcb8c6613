import CForsetti
import ForsettiBinary
import ForsettiBridge
import ForsettiCore
import Foundation
import Synchronization

/// A started module and how it runs.
struct RunningModule {
  enum Kind {
    case inProcess(LoadedModule, ModuleBinding)
    case isolated(WorkerProcess)
  }

  var record: Int
  var moduleID: String
  var kind: Kind
}

/// Crashes so far and when the next restart is due.
struct RestartState {
  var crashes: Int
  var due: ContinuousClock.Instant?
  var lastFailure: String
}

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
  /// When the next restart is due, if any (`run` sleeps until then at most).
  public var nextRestart: ContinuousClock.Instant? { restarts.values.compactMap(\.due).min() }

  /// The worker process of a started isolated module.
  public func workerPID(_ moduleID: String) -> Int32? {
    for r in running where r.moduleID == moduleID { if case .isolated(let w) = r.kind { return w.pid } }
    return nil
  }

  /// Whether any module is started or waiting to restart.
  public var hasWork: Bool { !running.isEmpty || restarts.values.contains { $0.due != nil } }

  func quarantined(_ moduleID: String, path: String) -> String? {
    var entries = quarantine.load()
    guard let e = entries[moduleID] else { return nil }
    if e.path == path, let now = BinaryIdentity.of(path), now == e.identity {
      return
        "quarantined after \(e.crashes) crashes (last: \(e.lastFailure)); rebuild or replace \(path) to lift it"
    }
    entries[moduleID] = nil
    try? quarantine.save(entries)
    environment.hostLog(.info, "quarantine of \(moduleID) lifted: \(path) changed")
    return nil
  }

  /// Stops a running worker: `stop`, then its `stopped` within `--stop-timeout`, or it is
  /// killed. A worker that already died, broke the protocol meanwhile, or closed its socket is
  /// recorded as such; no wait here outlasts its deadline.
  func stopWorker(_ worker: WorkerProcess, record i: Int) {
    let settings: IsolationSettings? = if case .isolated(let s) = mode { s } else { nil }
    let timeout = settings?.stopTimeout ?? 5
    worker.prepareStop()
    if let v = worker.session.violation {
      return violated(worker, record: i, v, when: "before stop")
    }
    let deadline = ContinuousClock.now + .wait(timeout)
    let asked = !worker.isClosed && worker.stop()
    while asked {
      guard let event = worker.events.next(until: deadline) else {
        worker.end()
        records[i].state = .stopped
        environment.hostLog(
          .warning, about: records[i].moduleID,
          "stop did not return within \(timeout) s; the worker was killed")
        return
      }
      switch event {
      case .frame(let f) where f.kind == .stopped:
        // Its last word: the worker exits now, and is killed if it does not.
        worker.end(grace: Self.exitGrace)
        records[i].state = .stopped
        environment.hostLog(.info, "stopped \(records[i].moduleID ?? "?")")
        return
      case .frame: continue
      case .violated(let v): return violated(worker, record: i, v, when: "during stop")
      case .closed: break
      }
      break
    }
    // The socket closed without a `stopped` frame (or before the stop was sent).
    let status = worker.end(grace: Self.exitGrace)
    if let status, WorkerProcess.signal(of: status) == nil, status == 0 {
      records[i].state = .stopped
      environment.hostLog(.info, "stopped \(records[i].moduleID ?? "?")")
      return
    }
    let tail = worker.recentLines.suffix(3).joined(separator: " | ")
    records[i].state = .failed(.crashed)
    environment.hostLog(
      .error, about: records[i].moduleID,
      "crashed: worker \(worker.describeExit(status)) during stop\(tail.isEmpty ? "" : "; last lines: \(tail)")"
    )
  }

  /// Records a running module's worker as ended for a protocol violation (it is killed).
  func violated(_ worker: WorkerProcess, record i: Int, _ v: ProtocolViolation, when: String) {
    worker.end()
    records[i].state = .failed(.protocolViolation)
    environment.hostLog(
      .error, about: records[i].moduleID, "\(ReasonCode.protocolViolation.rawValue) \(when): \(v)",
      ["reason": ReasonCode.protocolViolation.rawValue])
  }

  /// Handles worker exits and due restarts; call on the main thread when woken.
  public func superviseOnce() {
    let settings: IsolationSettings? = if case .isolated(let s) = mode { s } else { nil }
    for (id, pid) in inbox.drain() {
      // Matched by PID too: after a reload rollback another worker may run under the same ID.
      guard
        let k = running.firstIndex(where: { r in
          if case .isolated(let w) = r.kind { return r.moduleID == id && w.pid == pid }
          return false
        }), case .isolated(let worker) = running[k].kind
      else { continue }
      let r = running.remove(at: k)
      contributions[id] = nil
      if let v = worker.session.violation {
        // Counted like a crash: the worker's state can no longer be trusted, whether the module
        // meant it or scribbled on the socket, and restarts end in quarantine either way.
        violated(worker, record: r.record, v, when: "while running")
        if let settings { scheduleRestart(r.record, failure: v.description, settings: settings) }
        continue
      }
      let status = worker.end(grace: Self.exitGrace)
      let tail = worker.recentLines.suffix(3).joined(separator: " | ")
      let what = "worker \(worker.describeExit(status)) while running"
      records[r.record].state = .failed(.crashed)
      environment.hostLog(.error, about: id, "crashed: \(what)\(tail.isEmpty ? "" : "; last lines: \(tail)")")
      if let settings { scheduleRestart(r.record, failure: what, settings: settings) }
    }
    let now = ContinuousClock.now
    for (i, state) in restarts where (state.due.map { $0 <= now } ?? false) {
      restarts[i]?.due = nil
      guard let m = records[i].manifest else { continue }
      environment.hostLog(
        .info,
        "restarting \(m.moduleID) (crash \(state.crashes) of at most \(settings?.maxRestarts ?? 0) restarts)")
      records[i].trace = GateTrace(entries: records[i].trace.entries.filter { $0.step < .load })
      activate(record: i, manifest: m)
    }
    persist()
    refillSpareWorker()
  }

  func scheduleRestart(_ i: Int, failure: String, settings: IsolationSettings) {
    guard let m = records[i].manifest else { return }
    let crashes = (restarts[i]?.crashes ?? 0) + 1
    if crashes > settings.maxRestarts {
      restarts[i] = nil
      records[i].state = .failed(.quarantined)
      if let path = records[i].binaryPath, let identity = BinaryIdentity.of(path) {
        var entries = quarantine.load()
        entries[m.moduleID] = .init(path: path, identity: identity, crashes: crashes, lastFailure: failure)
        try? quarantine.save(entries)
      }
      environment.hostLog(
        .error, about: m.moduleID,
        "\(ReasonCode.quarantined.rawValue): \(crashes) crashes; not restarted until its binary changes")
      return
    }
    let delay = settings.backoffBase * Double(1 << (crashes - 1))
    restarts[i] = RestartState(
      crashes: crashes, due: .now + .wait(delay), lastFailure: failure)
    environment.hostLog(.info, "will restart \(m.moduleID) in \(delay) s")
  }
}
