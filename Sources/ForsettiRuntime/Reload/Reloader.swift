import ForsettiBinary
import ForsettiBridge
import ForsettiCore
import Foundation

/// What one reload did, for the one line `dev` prints per module.
public struct ReloadReport: Sendable {
  public enum Outcome: Sendable, Equatable {
    /// The new version runs (with the old one's state, when it saved any).
    case reloaded
    /// A module that was not running before now is.
    case started
    /// Its manifest is gone: stopped.
    case removed
    /// The new version failed after the old was stopped; the old one runs again.
    case rolledBack(ReasonCode)
    /// The new version failed a gate; the old one was never stopped.
    case rejected(ReasonCode)
    /// The new version asks for capabilities not yet approved; the old one keeps running.
    case approvalPending([Capability])
    /// A module restarted because a provider it depends on was reloaded.
    case restartedAfterProvider(String)
  }

  public var moduleID: String
  public var oldVersion: SemanticVersion?
  public var newVersion: SemanticVersion?
  public var outcome: Outcome
  /// From the file event to the new `start` returning (or to the decision).
  public var duration: Duration
  public var stateBytes: Int?
  /// The failing trace, printed under the line for rollbacks and rejections.
  public var trace: GateTrace?

  /// `com.x 1.0.0 → 1.1.0: reloaded, 12 bytes of state carried, 23 ms`
  public var line: String {
    let versions = "\(oldVersion.map(\.description) ?? "-") → \(newVersion.map(\.description) ?? "-")"
    let what: String
    switch outcome {
    case .reloaded:
      what = "reloaded" + (stateBytes.map { ", \($0) bytes of state carried" } ?? ", no state saved")
    case .started: what = "started"
    case .removed: what = "stopped: its manifest is gone"
    case .rolledBack(let r):
      what = "ROLLED BACK (\(r.rawValue)); the previous version runs again with its state"
    case .rejected(let r): what = "rejected (\(r.rawValue)); the running version keeps serving"
    case .approvalPending(let caps):
      what =
        "not reloaded: approval pending for \(caps.map(\.rawValue).joined(separator: ", ")); the running version keeps its approved set"
    case .restartedAfterProvider(let p): what = "restarted after its provider \(p)"
    }
    return "reload \(moduleID) \(versions): \(what) in \(ModuleManager.formatted(duration))"
  }
}

extension ModuleManager {
  /// Applies a change of files: `judgements` and `index` are the gate stack's fresh verdict on
  /// everything; `changed` the files the watcher reported. Modules whose manifest or binary
  /// changed are reloaded (gate first, then save state, stop, load the new copy, start with the
  /// state, and roll back on any failure or crash within `grace` seconds). `approvals` decides
  /// capabilities an update adds (`--approve-all` does not: additions need explicit approval).
  public func reload(
    judgements: [ModuleJudgement], index newIndex: BinaryIndex, changed: Set<String>,
    approvals: ApprovalLedger,
    grace: Double, since: ContinuousClock.Instant
  ) -> [ReloadReport] {
    let oldIndex = index
    index = newIndex
    var reports: [ReloadReport] = []
    let newByID = Dictionary(judgements.compactMap { j in j.moduleID.map { ($0, j) } }) { a, _ in a }

    // Removed manifests.
    for (i, r) in records.enumerated() {
      guard let id = r.moduleID, newByID[id] == nil, isRunning(id) else { continue }
      _ = stopRunning(id)
      reports.append(
        .init(
          moduleID: id, oldVersion: r.manifest?.moduleVersion, newVersion: nil, outcome: .removed,
          duration: .now - since))
      records[i].state = .stopped
    }

    // Changed or new modules, providers first.
    var affected: [ModuleJudgement] = []
    for j in judgements {
      guard let id = j.moduleID else { continue }
      guard let i = records.firstIndex(where: { $0.moduleID == id }) else {
        affected.append(j)
        continue
      }
      let old = records[i]
      let newPath = j.manifest.flatMap { m in try? newIndex.locate(entryPoint: m.entryPoint).get().path }
      let oldPath =
        old.binaryPath
        ?? old.manifest.flatMap { m in try? oldIndex.locate(entryPoint: m.entryPoint).get().path }
      let binaryChanged = [newPath, oldPath].contains { $0.map(changed.contains) ?? false }
      if old.manifest != j.manifest || binaryChanged || newPath != oldPath
        || (j.passed && !isRunning(id) && old.state != .stopped)
      {
        affected.append(j)
      }
    }
    let order = StartOrder.order(affected.compactMap(\.manifest)).map(\.moduleID)
    affected.sort {
      (order.firstIndex(of: $0.moduleID ?? "") ?? .max) < (order.firstIndex(of: $1.moduleID ?? "") ?? .max)
    }
    for j in affected {
      if let id = j.moduleID, j.manifest == nil, !isRunning(id),
        records.contains(where: { $0.moduleID == id })
      {
        continue  // still invalid, nothing runs: nothing to say twice
      }
      reports += reload(j, approvals: approvals, grace: grace, since: since)
    }
    persist()
    refillSpareWorker()
    return reports
  }

  public func isRunning(_ id: String) -> Bool { running.contains { $0.moduleID == id } }

  /// IDs and manifests of the started modules.
  public var startedManifests: [ModuleManifest] { running.compactMap { records[$0.record].manifest } }

  /// Restarts a started module with a new capability grant (an approval given or revoked while
  /// the host runs), handing the old instance's state to the new one.
  public func regrant(_ id: String, _ granted: Set<Capability>) {
    guard let i = records.firstIndex(where: { $0.moduleID == id }), let m = records[i].manifest, isRunning(id)
    else { return }
    let state = saveState(id)
    stopRunning(id)
    records[i].granted = granted
    records[i].trace = GateTrace(entries: records[i].trace.entries.filter { $0.step < .load })
    activate(record: i, manifest: m, copy: records[i].loadedFrom, state: state)
    environment.hostLog(
      .info,
      "restarted \(id) with capabilities \(granted.isEmpty ? "none" : granted.sorted().map(\.rawValue).joined(separator: ", "))"
    )
    persist()
    refillSpareWorker()
  }

  /// The capabilities each started module runs with.
  public var grants: [String: Set<Capability>] {
    Dictionary(running.map { ($0.moduleID, records[$0.record].granted) }) { a, _ in a }
  }

  /// Stops a started module whose entitlement ended (licence expired or changed, override
  /// off): it is recorded as `moduleLocked` with the reason.
  public func stopLocked(_ id: String, detail: String) {
    guard let i = records.firstIndex(where: { $0.moduleID == id }), stopRunning(id) else { return }
    records[i].state = .failed(.moduleLocked)
    environment.hostLog(.warning, about: id, "\(ReasonCode.moduleLocked.rawValue): stopped: \(detail)")
    persist()
  }

  /// Stops one running module; false when it was not running.
  @discardableResult
  func stopRunning(_ id: String) -> Bool {
    guard let k = running.firstIndex(where: { $0.moduleID == id }) else { return false }
    let r = running.remove(at: k)
    stop(r)
    contributions[id] = nil
    return true
  }

  /// Asks a running module for its state (nil when it keeps none or cannot say in time).
  func saveState(_ id: String) -> [UInt8]? {
    guard let r = running.first(where: { $0.moduleID == id }) else { return nil }
    switch r.kind {
    case .inProcess(let loaded, _): return StateTransfer.save(loaded.table)
    case .isolated(let worker):
      guard let id = worker.session.saveState() else { return nil }
      worker.send(WireFrame(.saveState, id: id))
      let deadline = ContinuousClock.now + .wait(Self.saveStateTimeout)
      while let e = worker.events.next(until: deadline) {
        switch e {
        case .frame(let f) where f.kind == .stateSaved:
          return f.bytes(0).flatMap { $0.isEmpty ? nil : $0 }
        case .frame: continue
        // The stop that follows finds the worker gone and records why (`stopWorker`).
        case .violated, .closed: return nil
        }
      }
      // Too slow: the reload goes on without state; a late answer is dropped, not a violation.
      worker.session.abandonSave(id)
      return nil
    }
  }

  /// Seconds an isolated module may take to hand over its state before a reload goes on
  /// without it.
  static let saveStateTimeout = 2.0

  /// Whether the module started and survived `grace` seconds (crashes only show in workers).
  func survives(_ id: String, grace: Double) -> Bool {
    guard let r = running.first(where: { $0.moduleID == id }), case .isolated(let worker) = r.kind else {
      return isRunning(id)
    }
    let end = ContinuousClock.now + .wait(grace)
    while ContinuousClock.now < end {
      if worker.isClosed { return false }
      usleep(5000)
    }
    return !worker.isClosed
  }

  private func reload(
    _ j: ModuleJudgement, approvals: ApprovalLedger, grace: Double, since: ContinuousClock.Instant
  )
    -> [ReloadReport]
  {
    guard let id = j.moduleID else { return [] }
    guard let i = records.firstIndex(where: { $0.moduleID == id }) else {
      // A new module.
      records.append(
        ModuleRecord(
          file: j.file, moduleID: id, manifest: j.manifest, binaryPath: nil,
          state: j.passed ? .gated : .blocked(j.reason ?? .validationFailed), trace: j.trace,
          startDuration: nil, granted: j.granted ?? j.manifest?.capabilitySet ?? []))
      guard let m = j.manifest, j.passed else {
        return [
          .init(
            moduleID: id, oldVersion: nil, newVersion: j.manifest?.moduleVersion,
            outcome: .rejected(j.reason ?? .validationFailed), duration: .now - since, trace: j.trace)
        ]
      }
      activate(record: records.count - 1, manifest: m)
      let r = records[records.count - 1]
      let outcome: ReloadReport.Outcome =
        r.state == .started ? .started : .rejected(r.state.reason ?? .loadFailed)
      return [
        .init(
          moduleID: id, oldVersion: nil, newVersion: m.moduleVersion, outcome: outcome,
          duration: .now - since, trace: r.state == .started ? nil : r.trace)
      ]
    }
    let old = records[i]
    let wasRunning = isRunning(id)
    guard let new = j.manifest, j.passed else {
      if !wasRunning {
        records[i].manifest = j.manifest
        records[i].trace = j.trace
        records[i].state = .blocked(j.reason ?? .validationFailed)
      }
      return [
        .init(
          moduleID: id, oldVersion: old.manifest?.moduleVersion, newVersion: j.manifest?.moduleVersion,
          outcome: .rejected(j.reason ?? .validationFailed), duration: .now - since, trace: j.trace)
      ]
    }
    // Capabilities an update adds wait for approval; the old version keeps its approved set.
    if wasRunning, let oldManifest = old.manifest {
      let added = new.capabilitySet.subtracting(oldManifest.capabilitySet)
      let pending = added.subtracting(approvals.approved[id] ?? [])
      if !pending.isEmpty {
        return [
          .init(
            moduleID: id, oldVersion: oldManifest.moduleVersion, newVersion: new.moduleVersion,
            outcome: .approvalPending(pending.sorted()), duration: .now - since)
        ]
      }
    }

    // Consumers of this module's role restart around it, in order.
    let roles = Set([new.defaultModuleRole, old.manifest?.defaultModuleRole].compactMap { $0 })
    let dependents = running.filter { r in
      r.moduleID != id
        && records[r.record].manifest.map { !StartOrder.consumedRoles($0).isDisjoint(with: roles) } == true
    }.map(\.record)
    var dependentStates: [Int: [UInt8]?] = [:]
    for d in dependents.reversed() {
      guard let did = records[d].moduleID else { continue }
      dependentStates[d] = saveState(did)
      stopRunning(did)
    }

    let state = wasRunning ? saveState(id) : nil
    if wasRunning { stopRunning(id) }
    records[i].manifest = new
    records[i].trace = j.trace
    records[i].granted = j.granted ?? new.capabilitySet
    records[i].file = j.file
    records[i].state = .gated
    activate(record: i, manifest: new, state: state)
    let took = ContinuousClock.now - since
    var reports: [ReloadReport] = []
    if records[i].state == .started && survives(id, grace: grace) {
      reports.append(
        .init(
          moduleID: id, oldVersion: old.manifest?.moduleVersion, newVersion: new.moduleVersion,
          outcome: wasRunning ? .reloaded : .started, duration: took, stateBytes: state?.count))
    } else {
      // Roll back: the new version failed to load, to start, or crashed within the grace period.
      if isRunning(id) { stopRunning(id) }
      superviseDrop(id)
      let failedTrace = records[i].trace
      let reason = records[i].state.reason ?? .crashed
      records[i] = old
      if wasRunning, let oldManifest = old.manifest, let copy = old.loadedFrom {
        records[i].trace = GateTrace(entries: old.trace.entries.filter { $0.step < .load })
        activate(record: i, manifest: oldManifest, copy: copy, state: state)
      }
      reports.append(
        .init(
          moduleID: id, oldVersion: old.manifest?.moduleVersion, newVersion: new.moduleVersion,
          outcome: wasRunning ? .rolledBack(reason) : .rejected(reason),
          duration: ContinuousClock.now - since, trace: failedTrace))
    }
    for d in dependents {
      guard let dm = records[d].manifest, let copy = records[d].loadedFrom else { continue }
      records[d].trace = GateTrace(entries: records[d].trace.entries.filter { $0.step < .load })
      activate(record: d, manifest: dm, copy: copy, state: dependentStates[d] ?? nil)
      reports.append(
        .init(
          moduleID: dm.moduleID, oldVersion: dm.moduleVersion, newVersion: dm.moduleVersion,
          outcome: .restartedAfterProvider(id), duration: ContinuousClock.now - since))
    }
    return reports
  }

  /// Forgets a pending restart and a queued exit of `id` (a reload decides its fate instead).
  func superviseDrop(_ id: String) {
    for (k, _) in restarts where records[k].moduleID == id { restarts[k] = nil }
  }
}
