import ForsettiBridge
import ForsettiCore

/// One module's place in the host: what is known about it, what runs of it, the version to
/// fall back to, and its restarts. Only its own methods change its state.
struct ModuleSlot {
  private(set) var record: ModuleRecord
  /// The started instance, if any.
  private(set) var instance: (any ModuleInstance)?
  /// When it was started relative to the others: modules stop in the reverse order.
  private(set) var startSequence = 0
  /// Its accepted UI contributions while it runs (visual modules).
  private(set) var ui: UIContributions?
  /// Crashes so far and when the next restart is due.
  private(set) var restart: RestartState?
  /// A reload held until its added capabilities are approved: what it waits for (reported once).
  private(set) var heldFor: Set<Capability>?
  /// A version that failed to replace the running one (its manifest and binary): not retried
  /// until one of its files changes.
  private(set) var refused: RefusedVersion?

  init(_ record: ModuleRecord) { self.record = record }

  var moduleID: String? { record.moduleID }
  var manifest: ModuleManifest? { record.manifest }
  var isRunning: Bool { instance != nil }

  /// A new verdict: the judged manifest, trace and grant, before loading.
  mutating func judged(_ j: ModuleJudgement) {
    record.file = j.file
    record.manifest = j.manifest
    record.trace = j.trace
    record.granted = j.granted ?? j.manifest?.capabilitySet ?? []
    record.state = j.passed ? .gated : .blocked(j.reason ?? .validationFailed)
    record.startDuration = nil
  }

  /// Back to the judged steps, for another start of the same version (a restart, a new grant).
  mutating func rejudged(granted: Set<Capability>? = nil) {
    record.trace = GateTrace(entries: record.trace.entries.filter { $0.step < .load })
    if let granted { record.granted = granted }
    record.state = .gated
  }

  /// The capabilities its next start gets (an approval changed while it waits to restart).
  mutating func regranted(_ granted: Set<Capability>) { record.granted = granted }

  /// Where it is loaded from (a version copy under `dev`).
  mutating func loading(from path: String, isSwift: Bool, binary: String?) {
    if let binary { record.binaryPath = binary }
    record.loadedFrom = path
    record.loadedIsSwift = isSwift
  }

  mutating func passed(_ step: GateStep, _ detail: String) {
    record.trace.pass(step, detail)
    if step == .load { record.state = .loaded }
  }

  /// A step failed: the rest are not evaluated.
  mutating func failed(_ step: GateStep, _ reason: ReasonCode, _ detail: String) {
    record.trace.fail(step, reason, detail)
    record.trace.skipRemaining(because: "not evaluated: \(step.rawValue) failed with \(reason.rawValue)")
    record.state = .failed(reason)
  }

  mutating func started(
    _ instance: any ModuleInstance, sequence: Int, ui: UIContributions?, took: Duration, detail: String
  ) {
    self.instance = instance
    startSequence = sequence
    self.ui = (record.manifest?.moduleType.isVisual ?? false) && !(ui?.isEmpty ?? true) ? ui : nil
    record.state = .started
    record.startDuration = took
    record.trace.pass(.start, detail)
  }

  /// A running instance the image of the host before this one handed over: started, with no
  /// start time of this image's.
  mutating func kept(_ instance: any ModuleInstance, sequence: Int, ui: UIContributions?, detail: String) {
    started(instance, sequence: sequence, ui: ui, took: .zero, detail: detail)
    record.startDuration = nil
  }

  /// Takes the instance out (to stop it, or because it is gone); the state says what became of it.
  mutating func release(as state: ModuleState) -> (any ModuleInstance)? {
    defer {
      instance = nil
      ui = nil
    }
    record.state = state
    return instance
  }

  /// A running version's later failure (a crash in its grace period): recorded under the start
  /// that preceded it.
  mutating func failedAfterStart(_ reason: ReasonCode, _ detail: String) {
    record.trace.fail(.start, reason, detail)
    record.state = .failed(reason)
  }

  /// Eligible, but kept off by the activation state, or no longer eligible: not running.
  mutating func held(_ state: ModuleState, trace: GateTrace? = nil) {
    if let trace { record.trace = trace }
    record.state = state
  }

  /// Back to a version that ran before (a rollback): its record as it was.
  mutating func restore(_ old: ModuleRecord) { record = old }

  /// Its `crashes`th crash so far: the next restart is due at `due`.
  mutating func willRestart(crashes: Int, due: ContinuousClock.Instant, failure: String) {
    restart = RestartState(crashes: crashes, due: due, lastFailure: failure)
  }

  /// The due restart is being made now (or will not be): the crash count stays.
  mutating func restartTaken() { restart?.due = nil }

  /// Crashes forgotten: a new version, a stop, or quarantine.
  mutating func forgetRestarts() { restart = nil }

  /// A reload waits for these capabilities to be approved; nil when it no longer waits.
  mutating func hold(for pending: Set<Capability>?) { heldFor = pending }

  /// A version that failed to replace the running one, not retried until a file changes; nil
  /// when the running version is no longer in doubt.
  mutating func refuse(_ version: RefusedVersion?) { refused = version }
}

/// A version that failed to replace the running one.
struct RefusedVersion: Equatable {
  var manifest: ModuleManifest?
  var binary: String?
  /// The gate that refused it, if one did (a later change of trust may let it pass).
  var reason: ReasonCode?
}

/// Crashes so far and when the next restart is due.
struct RestartState {
  var crashes: Int
  var due: ContinuousClock.Instant?
  var lastFailure: String
}
