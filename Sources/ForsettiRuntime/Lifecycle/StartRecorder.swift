import ForsettiBridge
import ForsettiCore

/// Writes how a start went, step by step, into the module's slot and the host's log: a failed
/// step, step 8's verdict, the start itself. Shared by the in-process start (`ModuleStarter`)
/// and the isolated one's records (`IsolatedActivation`), so both read alike.
struct StartRecorder {
  let table: ModuleTable
  let environment: HostEnvironment

  /// Records step `step` of module `i` as failed, and says so in the log (with the crash report
  /// of a worker that crashed).
  func fail(
    _ i: SlotHandle, _ step: GateStep, _ reason: ReasonCode, _ detail: String, crash: CrashReport? = nil
  ) {
    table[i].failed(step, reason, detail)
    environment.hostLog(
      .error, about: table[i].moduleID, "\(reason.rawValue) at \(step.rawValue): \(detail)",
      crash?.fields ?? [:], reason: reason)
  }

  /// Records step 8's verdict on module `i`; whether it passed.
  @discardableResult
  func record(_ i: SlotHandle, _ verdict: IdentityVerdict) -> Bool {
    switch verdict {
    case .fail(let v):
      fail(i, .identityAndUI, v.reason, v.detail)
      return false
    case .pass(let detail):
      table[i].passed(.identityAndUI, detail)
      return true
    }
  }

  /// Records a start: the slot holds the instance from now on.
  func started(
    _ i: SlotHandle, _ m: ModuleManifest, _ instance: any ModuleInstance, _ ui: UIContributions?,
    took: Duration,
    detail: String
  ) {
    let sequence = table.nextStart()
    table[i].started(instance, sequence: sequence, ui: ui, took: took, detail: detail)
    environment.hostLog(.info, "started \(m.moduleID) \(m.moduleVersion)", subject: m.moduleID)
  }
}
