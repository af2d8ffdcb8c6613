import ForsettiBridge
import ForsettiCore

/// What a crash of an isolated module leads to: a restart after `backoffBase` × 2^(n−1), or,
/// past `maxRestarts`, quarantine, kept in `quarantine.json` until its binary changes.
/// Supervision counts a running worker's end here, the isolated start a worker that died
/// while starting.
struct RestartSchedule {
  let table: ModuleTable
  let environment: HostEnvironment
  /// Restart limits and backoff; nil in-process, where nothing is restarted.
  let settings: IsolationSettings?
  let quarantine: QuarantineStore

  /// Module `i` failed (`failure`, as counted): its restart is scheduled, or it is quarantined.
  func crashed(_ i: SlotHandle, failure: String) {
    guard let settings, let m = table[i].manifest else { return }
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
