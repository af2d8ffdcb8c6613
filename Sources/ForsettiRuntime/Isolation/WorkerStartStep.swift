import ForsettiBridge
import ForsettiCore

/// What the host has heard so far from a worker on its way to started: what its next event
/// means depends on it.
struct WorkerStartProgress: Sendable, Equatable {
  /// Whether the worker was started ahead of need (a spare).
  var fromSpare: Bool
  /// Whether its `confined` came.
  var confined: Bool
  /// Whether its `loaded` came and was taken.
  var loaded: Bool
  /// Whether the host sent `start`.
  var startSent: Bool

  /// The gate step a failure now belongs to.
  var step: GateStep { loaded ? .start : .load }

  /// When a crash now happened, for its report.
  var moment: String { !loaded ? "while loading" : !startSent ? "after loading" : "during start" }
}

/// What one event from a worker means for its module's start. For every failure the worker has
/// been ended already.
enum WorkerStartStep: Sendable, Equatable {
  /// Confined, as this one-line summary says (for the load step's trace); loading now.
  case confined(String)
  /// Loaded, describing itself so: the host judges the descriptor (step 8) before `start`.
  case loaded(ModuleDescriptor, UIContributions?)
  /// `start` returned FORSETTI_OK and the worker's main thread confirmed it.
  case started
  /// Ended at a gate step for a reason, with the record's detail; `restart` is the failure to
  /// count against the module (a crash or a violation), nil when it is not restarted.
  case failed(GateStep, ReasonCode, String, restart: String?)
  /// A spare worker died before it confined itself for this module (killed from outside): not
  /// the module's doing, so nothing is counted; a worker of its own is to take over.
  case spareLost
  /// Nothing that moves the start.
  case nothing
}
