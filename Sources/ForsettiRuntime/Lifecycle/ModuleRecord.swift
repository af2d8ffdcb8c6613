import ForsettiBridge
import ForsettiCore

/// Where a module is in its life.
public enum ModuleState: Sendable, Hashable, CustomStringConvertible {
  case discovered
  /// Passed every pre-load gate; not loaded yet.
  case gated
  case loaded
  case started
  case stopped
  /// A pre-load gate refused it: none of its code ran.
  case blocked(ReasonCode)
  /// Loading, identity, UI or start failed.
  case failed(ReasonCode)
  /// Eligible, but the activation state keeps it off (disabled, not enabled under a deny
  /// policy, or another UI module is selected).
  case inactive(ReasonCode)

  public var name: String {
    switch self {
    case .discovered: "discovered"
    case .gated: "gated"
    case .loaded: "loaded"
    case .started: "started"
    case .stopped: "stopped"
    case .blocked: "blocked"
    case .failed: "failed"
    case .inactive: "inactive"
    }
  }

  public var reason: ReasonCode? {
    switch self {
    case .blocked(let r), .failed(let r), .inactive(let r): r
    default: nil
    }
  }

  /// Whether loading, identity, UI or start failed (`failed`).
  public var isFailure: Bool { if case .failed = self { true } else { false } }

  public var description: String { reason.map { "\(name) (\($0.rawValue))" } ?? name }
}

/// Everything the host knows about one module.
public struct ModuleRecord: Sendable {
  public var file: String
  public var moduleID: String?
  public var manifest: ModuleManifest?
  public var binaryPath: String?
  public var state: ModuleState
  public var trace: GateTrace
  /// When start returned, on the host's monotonic clock (nil until started).
  public var startDuration: Duration?
  /// The file actually loaded (a version copy in `dev`).
  public var loadedFrom: String?
  var loadedIsSwift = false
  /// The capabilities the module may use (approved and requested).
  public var granted: Set<Capability> = []
}

extension ModuleRecord {
  /// The record as `runtime.json` and `run --json` show it: file, ID, state, reason, binary.
  public var summaryJSON: JSONObject {
    JSONObject([
      ("file", .string(file)), ("moduleID", .string(orNull: moduleID)), ("state", .string(state.name)),
      ("reason", .string(orNull: state.reason?.rawValue)), ("binary", .string(orNull: binaryPath)),
      ("runningVersion", state == .started ? .string(orNull: manifest?.moduleVersion.description) : .null),
    ])
  }
}

extension ModuleRecord {
  /// A judged file's record, before loading.
  init(judgement j: ModuleJudgement) {
    self.init(
      file: j.file, moduleID: j.moduleID, manifest: j.manifest, binaryPath: nil,
      state: j.passed ? .gated : .blocked(j.reason ?? .validationFailed), trace: j.trace, startDuration: nil,
      granted: j.granted ?? j.manifest?.capabilitySet ?? [])
  }
}
