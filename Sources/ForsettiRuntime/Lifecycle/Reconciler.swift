import ForsettiBinary
import ForsettiBridge
import ForsettiCore

/// What should run, as judged now: the gate stack's verdict on every module, the binaries it
/// was judged with, which eligible modules the activation state keeps off, and the approvals
/// the user gave (for updates, which `--approve-all` does not cover).
package struct DesiredState: Sendable {
  package var judgements: [ModuleJudgement]
  package var index: BinaryIndex
  /// Eligible modules kept off, by module ID; every other eligible module should run.
  package var inactive: [String: Inactive]
  package var approvals: ApprovalLedger
  /// What the judgements were judged with: a running module whose files changed under `run`
  /// (which keeps the version it loaded) is judged again by its loaded manifest in it.
  package var context: GateContext?

  /// Why an eligible module does not run.
  package struct Inactive: Sendable, Hashable {
    package var reason: ReasonCode
    package var why: String

    package init(reason: ReasonCode, why: String) {
      self.reason = reason
      self.why = why
    }
  }

  package init(
    judgements: [ModuleJudgement], index: BinaryIndex, inactive: [String: Inactive] = [:],
    approvals: ApprovalLedger = .init(), context: GateContext? = nil
  ) {
    self.judgements = judgements
    self.index = index
    self.inactive = inactive
    self.approvals = approvals
    self.context = context
  }
}

/// Converging the table on a `DesiredState` (`reconcile`), and the changes asked for between
/// rounds (an operator's `reloadNow`, an application's `regrant`), through the parts that start,
/// stop and reload its modules. Driven by `LiveHost`, through `ModuleManager`.
struct Reconciler {
  let table: ModuleTable
  let environment: HostEnvironment
  let starter: ModuleStarter
  let stopper: ModuleStopper
  let reload: Reload
  /// Where a spare worker is refilled after a round (isolated mode).
  let workers: WorkerSupply?
  let stateFiles: RuntimeStatePublisher
  /// Workers the image before this one handed over, served instead of started (first round).
  let adoption: WorkerHandoff.Pending
  let inbox: SupervisorInbox

  /// Converges on `desired`: stops what is gone, no longer eligible or no longer active (last
  /// started first); reloads running modules whose version changed when `reloadsVersions` (dev;
  /// `changed` are the files the watcher reported) and restarts those whose grant changed;
  /// starts what is eligible and active but not running (providers first). One log line per
  /// change, with its reason; `quiet` leaves out the start lines (the host's first start
  /// prints a table instead). Returns the reloads, for `dev` to print.
  @discardableResult
  func reconcile(
    _ desired: DesiredState, changed: Set<String>, reloadsVersions: Bool, grace: Double,
    since: ContinuousClock.Instant, quiet: Bool
  ) -> [ReloadReport] {
    let start = HostMetrics.now()
    defer { environment.metrics.reconciles.record(nanoseconds: HostMetrics.now() &- start) }
    starter.index = desired.index
    let judged = Dictionary(desired.judgements.compactMap { j in j.moduleID.map { ($0, j) } }) { a, _ in a }
    var reports = stopGone(judged, since: since)
    stopUnwanted(desired, judged, changed: changed, reloadsVersions: reloadsVersions)
    reports += replaceChanged(
      desired, judged, changed: changed, reloadsVersions: reloadsVersions, grace: grace, since: since)
    startWanted(desired, changed: changed, quiet: quiet)
    stateFiles.persist()
    workers?.refill()
    return reports
  }

  /// Reloads `j`'s module now whatever changed (an operator asked), unless the activation state
  /// keeps it off.
  func reloadNow(_ j: ModuleJudgement, _ desired: DesiredState, grace: Double) -> [ReloadReport] {
    guard let id = j.moduleID, let i = table.handle(of: id) else { return [] }
    starter.index = desired.index
    let since = ContinuousClock.now
    if let off = desired.inactive[id] {
      return [
        ReloadReport(
          moduleID: id, oldVersion: table[i].manifest?.moduleVersion, newVersion: j.manifest?.moduleVersion,
          outcome: .rejected(off.reason), duration: .now - since)
      ]
    }
    table[i].hold(for: nil)
    table[i].forgetRestarts()
    let reports = reload.run(i, to: j, approvals: desired.approvals, grace: grace, since: since)
    stateFiles.persist()
    workers?.refill()
    return reports
  }

  /// Running modules whose manifest is gone.
  private func stopGone(_ judged: [String: ModuleJudgement], since: ContinuousClock.Instant) -> [ReloadReport]
  {
    var reports: [ReloadReport] = []
    for i in table.running.reversed() {
      guard let id = table[i].moduleID, judged[id] == nil else { continue }
      let version = table[i].manifest?.moduleVersion
      stopper.stop(i)
      environment.hostLog(.info, about: id, "stopped: its manifest is gone")
      reports.append(
        ReloadReport(
          moduleID: id, oldVersion: version, newVersion: nil, outcome: .removed, duration: .now - since))
    }
    return reports
  }

  /// Running modules that may no longer run (a gate now refuses the version that runs) or that
  /// the activation state now keeps off.
  private func stopUnwanted(
    _ desired: DesiredState, _ judged: [String: ModuleJudgement], changed: Set<String>, reloadsVersions: Bool
  ) {
    for i in table.running.reversed() {
      guard let id = table[i].moduleID, let newest = judged[id] else { continue }
      let j = loadedVersion(i, newest, desired, changed: changed, reloadsVersions: reloadsVersions)
      // A new version that fails a gate under dev is a refused reload: the old one keeps serving,
      // through later rounds too.
      let refusedReload =
        reloadsVersions
        && (versionChanged(i, j, changed)
          || table[i].refused == RefusedVersion(j, binary: starter.binaryPath(of: j)))
      if let failure = j.trace.firstFailure, let reason = failure.reason, !refusedReload {
        stopper.stop(i)
        table[i].judged(j)
        environment.hostLog(
          .warning, about: id,
          "\(reason.rawValue): stopped: \(Self.noLonger(failure.step)): \(failure.detail)",
          ["reason": reason.rawValue])
      } else if j.passed, let off = desired.inactive[id] {
        stopper.stop(i)
        table[i].judged(j)
        table[i].held(.inactive(off.reason), trace: Self.inactiveTrace(j.trace, off))
        environment.hostLog(
          .info, about: id, "\(off.reason.rawValue): stopped: \(off.why)", ["reason": off.reason.rawValue])
      }
    }
  }

  /// How a stop for a gate's refusal reads.
  static func noLonger(_ step: GateStep) -> String {
    switch step {
    case .entitlement: "no longer unlocked"
    case .approval: "no longer approved"
    default: "no longer passes \(step.rawValue)"
    }
  }

  /// Running modules staying up: a new version under dev, or a new grant (an approval given or
  /// revoked), providers first.
  private func replaceChanged(
    _ desired: DesiredState, _ judged: [String: ModuleJudgement], changed: Set<String>, reloadsVersions: Bool,
    grace: Double, since: ContinuousClock.Instant
  ) -> [ReloadReport] {
    var reports: [ReloadReport] = []
    let candidates = table.running.compactMap { i -> (SlotHandle, ModuleJudgement)? in
      guard let id = table[i].moduleID, let j = judged[id], desired.inactive[id] == nil else { return nil }
      return (i, j)
    }
    let order = StartOrder.order(candidates.compactMap { $0.1.manifest }).map(\.moduleID)
    let sorted = candidates.sorted {
      (order.firstIndex(of: $0.1.moduleID ?? "") ?? .max)
        < (order.firstIndex(of: $1.1.moduleID ?? "") ?? .max)
    }
    for (i, newest) in sorted where table[i].isRunning {
      if reloadsVersions && versionChanged(i, newest, changed) {
        let j = newest
        if let refused = table[i].refused, refused == RefusedVersion(j, binary: starter.binaryPath(of: j)),
          !filesChanged(i, j, changed)
        {
          continue  // already refused, and none of its files changed since
        }
        reports += reload.run(i, to: j, approvals: desired.approvals, grace: grace, since: since)
        continue
      }
      let j = loadedVersion(i, newest, desired, changed: changed, reloadsVersions: reloadsVersions)
      if j.passed, let granted = j.granted, granted != table[i].record.granted { regrant(i, granted) }
    }
    return reports
  }

  /// Modules eligible and active but not running; blocked and inactive ones recorded as such.
  private func startWanted(_ desired: DesiredState, changed: Set<String>, quiet: Bool) {
    var toStart: [SlotHandle] = []
    for j in desired.judgements {
      let i = slot(for: j)
      guard !table[i].isRunning else { continue }
      let was = table[i].record.state
      // A failure of this same version (to load, to start, quarantined) is supervision's to
      // retry, or waits for a new version; so does a restart already scheduled — but what it
      // restarts with follows the verdict: no restart once it may not run, the grant as it is now.
      if !versionChanged(i, j, changed), was.isFailure || table[i].restart?.due != nil {
        let off = j.moduleID.flatMap { desired.inactive[$0] }
        if !j.passed || off != nil {
          table[i].restartTaken()
          table[i].judged(j)
          if let off { table[i].held(.inactive(off.reason), trace: Self.inactiveTrace(j.trace, off)) }
        } else if let granted = j.granted {
          table[i].regranted(granted)
        }
        continue
      }
      table[i].judged(j)
      guard j.passed, let id = j.moduleID else { continue }
      if let off = desired.inactive[id] {
        table[i].held(.inactive(off.reason), trace: Self.inactiveTrace(j.trace, off))
        continue
      }
      toStart.append(i)
      if !quiet { environment.hostLog(.info, about: id, "starting: \(Self.why(was))") }
    }
    if let handed = adoption.take(), let workers {
      let handoff = WorkerHandoff(table: table, environment: environment, workers: workers, inbox: inbox)
      handoff.judge(handed.workers, load: starter.workerLoad)
      toStart.removeAll { table[$0].isRunning }
      handoff.restore(handed.restarts, toStart: &toStart)
    }
    starter.start(toStart)
  }

  /// Why a module that did not run starts now.
  static func why(_ was: ModuleState) -> String {
    switch was {
    case .blocked(let r): "now eligible (was \(r.rawValue))"
    case .inactive(let r): "now active (was \(r.rawValue))"
    case .failed(let r): "a new version (the last failed: \(r.rawValue))"
    case .stopped: "eligible again"
    default: "a new module"
    }
  }

  /// The judged trace of a module kept off, with the later steps saying why.
  static func inactiveTrace(_ trace: GateTrace, _ off: DesiredState.Inactive) -> GateTrace {
    var t = trace
    t.skipRemaining(because: "not started: \(off.reason.rawValue): \(off.why)")
    return t
  }

  /// The slot of `j`'s module (a new one for a module not seen before).
  private func slot(for j: ModuleJudgement) -> SlotHandle {
    if let id = j.moduleID {
      return table.handle(of: id) ?? table.append(ModuleSlot(ModuleRecord(judgement: j)))
    }
    return table.handles.first { table[$0].moduleID == nil && table[$0].record.file == j.file }
      ?? table.append(ModuleSlot(ModuleRecord(judgement: j)))
  }

  /// The verdict on the version running in slot `i`: `newest` itself, unless its files changed
  /// and the host keeps what it loaded (`run`) — then the loaded manifest judged again in the same
  /// context, so that a trust change still reaches a module whose manifest file was edited.
  private func loadedVersion(
    _ i: SlotHandle, _ newest: ModuleJudgement, _ desired: DesiredState, changed: Set<String>,
    reloadsVersions: Bool
  ) -> ModuleJudgement {
    guard !reloadsVersions, versionChanged(i, newest, changed), let m = table[i].manifest,
      let context = desired.context
    else { return newest }
    var trace = GateTrace(entries: table[i].record.trace.entries.filter { $0.step < .compatibility })
    GateEvaluator.evaluatePreLoad(m, context, into: &trace)
    return ModuleJudgement(
      file: table[i].record.file, moduleID: m.moduleID, manifest: m, trace: trace,
      granted: ApprovalRules.granted(m, approvals: context.approvals))
  }

  /// Whether `j` is another version than the one slot `i` holds: another manifest, another
  /// binary, or its binary rewritten (reported by the watcher).
  private func versionChanged(_ i: SlotHandle, _ j: ModuleJudgement, _ changed: Set<String>) -> Bool {
    let r = table[i].record
    if r.manifest != j.manifest { return true }
    let now = starter.binaryPath(of: j)
    if let was = r.binaryPath, let now, was != now { return true }
    return filesChanged(i, j, changed)
  }

  /// Whether the watcher reported a change of `j`'s binary (or of the one slot `i` loaded).
  private func filesChanged(_ i: SlotHandle, _ j: ModuleJudgement, _ changed: Set<String>) -> Bool {
    guard !changed.isEmpty else { return false }
    return [starter.binaryPath(of: j), table[i].record.binaryPath].contains {
      $0.map(changed.contains) ?? false
    }
  }

  /// Restarts running module `i` with a new capability grant, handing the old instance's state
  /// to the new one.
  private func regrant(_ i: SlotHandle, _ granted: Set<Capability>) {
    guard let m = table[i].manifest, table[i].isRunning else { return }
    let state = table[i].instance?.saveState()
    stopper.stop(i)
    table[i].rejudged(granted: granted)
    starter.activate(slot: i, manifest: m, copy: table[i].record.loadedFrom, state: state)
    environment.hostLog(
      .info,
      "restarted \(m.moduleID) with capabilities \(granted.isEmpty ? "none" : granted.sorted().map(\.rawValue).joined(separator: ", "))"
    )
  }

  /// `regrant` by module ID, for an embedding application.
  func regrant(_ id: String, _ granted: Set<Capability>) {
    guard let i = table.handle(of: id) else { return }
    regrant(i, granted)
    stateFiles.persist()
    workers?.refill()
  }
}
