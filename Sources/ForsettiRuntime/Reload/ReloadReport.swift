import ForsettiCore

/// What one reload did, for the one line `dev` prints per module.
public struct ReloadReport: Sendable {
  public enum Outcome: Sendable, Equatable {
    /// The new version runs (with the old one's state, when it saved any).
    case reloaded
    /// A module that was not running before now is.
    case started
    /// Its manifest is gone: stopped.
    case removed
    /// The new version failed after the old was stopped (to load, to start, or it crashed in
    /// its grace period); the old one runs again.
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
    return "reload \(moduleID) \(versions): \(what) in \(DurationText.short(duration))"
  }
}
