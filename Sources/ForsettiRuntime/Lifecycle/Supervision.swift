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

  func activateIsolated(
    record i: Int, manifest m: ModuleManifest, path: String, isSwift: Bool, settings: IsolationSettings,
    state: [UInt8]? = nil
  ) {
    let sandbox = environment.sandboxPath(for: m.moduleID)
    // The worker may write only inside its sandbox, so the host creates it beforehand.
    do { _ = try SandboxStorage(root: sandbox) } catch {
      fail(i, .load, .loadFailed, error.description)
      return
    }
    let dir = (path as NSString).deletingLastPathComponent
    let policy = ConfinementPolicy(
      readExecute: [path, dir, settings.workerExecutable, "/etc/ld.so.cache"]
        + IsolationSettings.libraryDirectories(),
      readWrite: [sandbox, "/dev/null"], networking: records[i].granted.contains(.networking),
      limits: settings.limits)
    let config = WorkerConfiguration(
      moduleID: m.moduleID, library: path, entryPoint: m.entryPoint, isSwift: isSwift, sandbox: sandbox,
      granted: records[i].granted, policy: policy, parent: getpid())
    let clock = ContinuousClock()
    let began = clock.now
    let inbox = self.inbox
    var worker: WorkerProcess
    let onExit: @Sendable (String, Int32) -> Void = { id, pid in inbox.post(id, pid: pid) }
    func freshWorker() -> WorkerProcess? {
      do {
        return try WorkerProcess(
          executable: settings.workerExecutable, configuration: config, environment: environment,
          onExit: onExit)
      } catch {
        fail(i, .load, .loadFailed, "could not start a worker: \(error)")
        return nil
      }
    }
    var fromSpare = false
    if let started = spareWorker?.take() {
      worker = WorkerProcess(started, configuration: config, environment: environment, onExit: onExit)
      fromSpare = true
    } else {
      guard let w = freshWorker() else { return }
      worker = w
    }
    let deadline = began + .milliseconds(Int(settings.startTimeout * 1000))
    func next() -> WireFrame? {
      let left = deadline - clock.now
      let seconds = Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18
      return worker.lifecycle.next(timeout: max(0, seconds))
    }
    func timedOut(_ step: GateStep, _ what: String) {
      worker.kill()
      fail(
        i, step, .startTimedOut,
        "\(what) did not finish within \(settings.startTimeout) s; the worker was killed")
    }
    func crashed(_ step: GateStep, _ what: String) {
      let status = worker.reap()
      let lines = worker.recentLines
      let tail = lines.isEmpty ? "" : "; last lines: " + lines.suffix(3).joined(separator: " | ")
      fail(i, step, .crashed, "worker \(WorkerProcess.describe(status: status)) \(what)\(tail)")
      scheduleRestart(i, failure: "\(WorkerProcess.describe(status: status)) \(what)", settings: settings)
    }

    // Confined, then loaded (or not).
    var confinedDetail = ""
    var loadedFrame: WireFrame?
    while loadedFrame == nil {
      guard let f = next() else { return timedOut(.load, "loading") }
      switch f.kind {
      case .confined:
        confinedDetail = Self.describeConfinement(f.string(0) ?? "")
      case .loaded:
        loadedFrame = f
      case .loadFailed:
        worker.reap()
        let reason = f.string(0).flatMap(ReasonCode.init(rawValue:)) ?? .loadFailed
        return fail(i, .load, reason, f.string(1) ?? "the worker could not load the module")
      case .stopped:
        if fromSpare && confinedDetail.isEmpty {
          // The spare died before it confined itself for this module (killed from outside):
          // not the module's doing, so no crash is counted; a worker of its own takes over.
          worker.reap()
          fromSpare = false
          guard let w = freshWorker() else { return }
          worker = w
          continue
        }
        return crashed(.load, "while loading")
      default:
        continue
      }
    }
    guard let text = loadedFrame?.string(0), let (descriptor, ui) = WorkerCodec.decodeLoaded(text) else {
      worker.kill()
      return fail(i, .load, .loadFailed, "the worker reported its module in a form the host cannot read")
    }
    records[i].state = .loaded
    records[i].trace.pass(.load, "loaded \(path) in worker pid \(worker.pid) (\(confinedDetail))")
    guard checkIdentityAndUI(i, m, descriptor, ui) else {
      worker.kill()
      return
    }

    worker.send(WireFrame(.start, [.bytes(state ?? [])]))
    guard let result = next() else { return timedOut(.start, "start") }
    guard result.kind == .startResult, let status = result.int(0) else {
      return crashed(.start, "during start")
    }
    guard status == Int64(FORSETTI_OK) else {
      worker.reap()
      return fail(
        i, .start, .startFailed, "start returned \(StatusName.of(Int32(truncatingIfNeeded: status)))")
    }
    running.append(RunningModule(record: i, moduleID: m.moduleID, kind: .isolated(worker)))
    let took = clock.now - began
    markStarted(
      i, m, ui, took: took,
      detail:
        "started in worker pid \(worker.pid) in \(Self.formatted(took)) (spawn + confine + load + start)")
  }

  func stopWorker(_ worker: WorkerProcess, record i: Int) {
    let settings: IsolationSettings? = if case .isolated(let s) = mode { s } else { nil }
    let timeout = settings?.stopTimeout ?? 5
    worker.prepareStop()
    worker.send(WireFrame(.stop))
    let answer = worker.lifecycle.next(timeout: timeout)
    if answer == nil {
      worker.kill()
      records[i].state = .stopped
      environment.log.write(
        LogRecord(
          level: .warning, moduleID: records[i].moduleID,
          message: "stop did not return within \(timeout) s; the worker was killed"))
      return
    }
    let status = worker.reap()
    if answer?.id == UInt64.max, WorkerProcess.signal(of: status) != nil || status != 0 {
      // The socket closed without a `stopped` frame: the module died inside stop.
      let tail = worker.recentLines.suffix(3).joined(separator: " | ")
      records[i].state = .failed(.crashed)
      environment.log.write(
        LogRecord(
          level: .error, moduleID: records[i].moduleID,
          message:
            "crashed: worker \(WorkerProcess.describe(status: status)) during stop\(tail.isEmpty ? "" : "; last lines: \(tail)")"
        ))
      return
    }
    records[i].state = .stopped
    environment.hostLog(.info, "stopped \(records[i].moduleID ?? "?")")
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
      let status = worker.reap()
      let tail = worker.recentLines.suffix(3).joined(separator: " | ")
      let what = "worker \(WorkerProcess.describe(status: status)) while running"
      records[r.record].state = .failed(.crashed)
      environment.log.write(
        LogRecord(
          level: .error, moduleID: id,
          message: "crashed: \(what)\(tail.isEmpty ? "" : "; last lines: \(tail)")"))
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
      environment.log.write(
        LogRecord(
          level: .error, moduleID: m.moduleID,
          message:
            "\(ReasonCode.quarantined.rawValue): \(crashes) crashes; not restarted until its binary changes"))
      return
    }
    let delay = settings.backoffBase * Double(1 << (crashes - 1))
    restarts[i] = RestartState(
      crashes: crashes, due: .now + .milliseconds(Int(delay * 1000)), lastFailure: failure)
    environment.hostLog(.info, "will restart \(m.moduleID) in \(delay) s")
  }
}
