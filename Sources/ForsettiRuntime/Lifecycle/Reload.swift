import ForsettiBinary
import ForsettiBridge
import ForsettiCore
import Glibc

// A reload in cr.h's shape, one function per transition:
//
//   gate → approval decision → save state → stop dependents → stop old → load new → start
//        → watch grace → commit | roll back → restart dependents
//
// The gate and the approval decision come first, so a version that may not run never costs the
// running one anything; from "stop old" on, any failure rolls back to the old version, started
// from its own copy with the state it saved.

/// A module's reload, in the transitions above, on the table's slots: modules are started and
/// stopped through `ModuleStarter` and `ModuleStopper`. The reconciler drives it (an operator's
/// `reload`, and every round under `dev`).
struct Reload {
  let table: ModuleTable
  let environment: HostEnvironment
  let starter: ModuleStarter
  let stopper: ModuleStopper

  /// Replaces running module `i` with the judged version `j` (or starts it, when it was not
  /// running). `approvals` are the stored ones (with `--approve-all` the running version's
  /// grant counts as approved too); `grace` is how long the new version must survive.
  func run(
    _ i: SlotHandle, to j: ModuleJudgement, approvals: ApprovalLedger, grace: Double,
    since: ContinuousClock.Instant
  ) -> [ReloadReport] {
    guard let id = j.moduleID else { return [] }
    let old = table[i].record
    guard table[i].isRunning else { return startInstead(i, j, since: since) }
    // Gate.
    guard let new = j.manifest, j.passed else {
      table[i].refuse(RefusedVersion(j, binary: starter.binaryPath(of: j)))
      return [report(id, old, j, .rejected(j.reason ?? .validationFailed), since, trace: j.trace)]
    }
    // Approval decision.
    let pending = ApprovalRules.pendingUpdate(
      new, approvals: approvals, running: old.manifest, granted: old.granted)
    if !pending.isEmpty {
      // Said once per pending set; the reload resumes when a later judgement finds none.
      guard table[i].heldFor != pending else { return [] }
      table[i].hold(for: pending)
      return [report(id, old, j, .approvalPending(pending.sorted()), since)]
    }
    table[i].hold(for: nil)
    let state = saveState(i)
    let dependents = stopDependents(of: i, roles: [new.defaultModuleRole, old.manifest?.defaultModuleRole])
    stopper.stop(i)
    loadNew(i, j, state: state)
    var reports: [ReloadReport]
    if watchGrace(i, grace: grace) {
      reports = [commit(i, old, j, state: state, since: since)]
    } else {
      reports = [rollBack(i, old, j, state: state, since: since)]
    }
    reports += restartDependents(dependents, after: id, since: since)
    return reports
  }

  /// A module that was not running: started from its new version, reported as such.
  private func startInstead(_ i: SlotHandle, _ j: ModuleJudgement, since: ContinuousClock.Instant)
    -> [ReloadReport]
  {
    guard let id = j.moduleID else { return [] }
    let old = table[i].record
    table[i].judged(j)
    guard let m = j.manifest, j.passed else {
      return [report(id, old, j, .rejected(j.reason ?? .validationFailed), since, trace: j.trace)]
    }
    starter.activate(slot: i, manifest: m)
    let r = table[i].record
    if r.state != .started { table[i].refuse(RefusedVersion(j, binary: r.binaryPath)) }
    let outcome: ReloadReport.Outcome =
      r.state == .started ? .started : .rejected(r.state.reason ?? .loadFailed)
    return [report(id, old, j, outcome, since, trace: r.state == .started ? nil : r.trace, wasRunning: false)]
  }

  /// The running instance's state, for the next one (nil when it keeps none or cannot say in
  /// time).
  private func saveState(_ i: SlotHandle) -> [UInt8]? { table[i].instance?.saveState() }

  /// Stops the running consumers of `roles`, last started first: they restart around their
  /// provider. Each one's slot and saved state.
  private func stopDependents(of i: SlotHandle, roles: [DefaultModuleRole?]) -> [(
    slot: SlotHandle, state: [UInt8]?
  )] {
    let provided = Set(roles.compactMap { $0 })
    let consumers = table.running.filter { k in
      k != i && table[k].manifest.map { !StartOrder.consumedRoles($0).isDisjoint(with: provided) } == true
    }
    var out: [(slot: SlotHandle, state: [UInt8]?)] = []
    for k in consumers.reversed() {
      out.insert((k, saveState(k)), at: 0)
      stopper.stop(k)
    }
    return out
  }

  /// Loads the new version from a fresh copy and starts it with the old one's state.
  private func loadNew(_ i: SlotHandle, _ j: ModuleJudgement, state: [UInt8]?) {
    guard let m = j.manifest else { return }
    table[i].judged(j)
    starter.activate(slot: i, manifest: m, state: state)
  }

  /// Whether the new version started and is still running `grace` seconds later. A worker that
  /// ends within it is recorded as failing then — a crash in its grace period — not as a failure
  /// of the stop that the rollback would otherwise find it in.
  private func watchGrace(_ i: SlotHandle, grace: Double) -> Bool {
    guard let instance = table[i].instance else { return false }
    guard let isolated = instance as? IsolatedInstance else { return true }
    let worker = isolated.worker
    let began = ContinuousClock.now
    let end = began + .wait(grace)
    while ContinuousClock.now < end {
      if worker.isClosed { break }
      usleep(5000)
    }
    guard worker.isClosed else { return true }
    let after = DurationText.short(ContinuousClock.now - began)
    let ending = worker.finish()
    let reason = ending.reason
    let what =
      if case .violated(let v) = ending { "broke the worker protocol (\(v))" } else { ending.description }
    let tail = worker.recentLines.suffix(3).joined(separator: " | ")
    let detail =
      "\(what) \(after) after start, within its \(grace) s grace period\(tail.isEmpty ? "" : "; last lines: \(tail)")"
    _ = table[i].release(as: .failed(reason))
    table[i].failedAfterStart(reason, detail)
    environment.hostLog(.error, about: worker.moduleID, "\(reason.rawValue) in its grace period: \(detail)")
    return false
  }

  /// The new version stays.
  private func commit(
    _ i: SlotHandle, _ old: ModuleRecord, _ j: ModuleJudgement, state: [UInt8]?,
    since: ContinuousClock.Instant
  ) -> ReloadReport {
    table[i].refuse(nil)
    table[i].forgetRestarts()
    var r = report(j.moduleID ?? "", old, j, .reloaded, since)
    r.stateBytes = state?.count
    return r
  }

  /// The new version failed: the old one runs again from its own copy, with its state; the new
  /// version's trace, failure included, goes with the report.
  private func rollBack(
    _ i: SlotHandle, _ old: ModuleRecord, _ j: ModuleJudgement, state: [UInt8]?,
    since: ContinuousClock.Instant
  ) -> ReloadReport {
    if table[i].isRunning { stopper.stop(i) }
    table[i].forgetRestarts()
    let failed = table[i].record
    table[i].refuse(RefusedVersion(j, binary: failed.binaryPath))
    table[i].restore(old)
    if let m = old.manifest, let copy = old.loadedFrom {
      table[i].rejudged()
      starter.activate(slot: i, manifest: m, copy: copy, state: state)
    }
    return report(
      j.moduleID ?? "", old, j, .rolledBack(failed.state.reason ?? .crashed), since, trace: failed.trace)
  }

  /// Starts the consumers stopped around their provider again, each with its state.
  private func restartDependents(
    _ dependents: [(slot: SlotHandle, state: [UInt8]?)], after provider: String,
    since: ContinuousClock.Instant
  ) -> [ReloadReport] {
    dependents.compactMap { d in
      guard let m = table[d.slot].manifest, let copy = table[d.slot].record.loadedFrom else { return nil }
      table[d.slot].rejudged()
      starter.activate(slot: d.slot, manifest: m, copy: copy, state: d.state)
      return ReloadReport(
        moduleID: m.moduleID, oldVersion: m.moduleVersion, newVersion: m.moduleVersion,
        outcome: .restartedAfterProvider(provider), duration: .now - since)
    }
  }

  private func report(
    _ id: String, _ old: ModuleRecord, _ j: ModuleJudgement, _ outcome: ReloadReport.Outcome,
    _ since: ContinuousClock.Instant, trace: GateTrace? = nil, wasRunning: Bool = true
  ) -> ReloadReport {
    ReloadReport(
      moduleID: id, oldVersion: wasRunning ? old.manifest?.moduleVersion : nil,
      newVersion: j.manifest?.moduleVersion, outcome: outcome, duration: .now - since, trace: trace)
  }
}

extension RefusedVersion {
  init(_ j: ModuleJudgement, binary: String?) {
    self.init(manifest: j.manifest, binary: binary, reason: j.reason)
  }
}
