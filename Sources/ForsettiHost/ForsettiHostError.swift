import ForsettiCore
import ForsettiRuntime

/// Why a `ForsettiHost` could not be made, configured or started: the reason and the value at
/// fault.
public enum ForsettiHostError: Error, Sendable, CustomStringConvertible {
  /// The state directory at `path` cannot be created, opened or held.
  case stateDirectoryUnusable(path: String, reason: String)
  /// Another host runs on the state directory at `path` (`holder`: its pid, as it wrote it), or
  /// its lock cannot be taken (`holder` nil, `reason` says why).
  case stateDirectoryLocked(path: String, holder: Int32?, reason: String)
  /// Isolation names a worker executable that is not there (or not executable).
  /// The worker executable cannot be run by this process: `reason` says why (missing, behind
  /// a directory this user cannot search, not executable).
  case workerMissing(path: String, reason: String)
  /// Settings out of their range (`ForsettiHost.Configuration.validated()`), each naming its
  /// field.
  case invalidSettings([SettingProblem])
  /// A configuration file (`Configuration(file:)`) that cannot be used as written: by line.
  case configurationFile(ConfigFileError)
  /// Judging failed: unreadable manifests, a malformed state or entitlements file.
  case judging(JudgeError)
  /// `STATE/control.sock` could not be made at `path`.
  case controlSocket(path: String, ControlError)
  /// An application service was refused (its ID is registered already, say).
  case service(id: String, ApplicationServiceError)
  /// `call` was made at the wrong moment of the host's life: `register` after `start`, `start`
  /// twice or after `stop`.
  case wrongPhase(call: String, phase: String)
  /// `start`'s `askingApproval` ended the start; nothing was started.
  case startAbandoned
  /// `/metrics` could not be served at `address` (`reason` says why).
  case metrics(address: String, reason: String)

  public var description: String {
    switch self {
    case .stateDirectoryUnusable(let path, let reason): "state directory \(path): \(reason)"
    case .stateDirectoryLocked(let path, _, let reason): "state directory \(path): \(reason)"
    case .workerMissing(let path, let reason):
      "the worker executable \(path) \(reason); point isolation's workerExecutable at forsetti-worker, "
        + "or set isolation to nil to load modules into this process"
    case .invalidSettings(let problems): problems.map(\.description).joined(separator: "; ")
    case .configurationFile(let e): e.description
    case .judging(let e): e.description
    case .controlSocket(let path, let e): "control socket \(path): \(e)"
    case .service(let id, let e): "application service \(id): \(e)"
    case .wrongPhase(let call, let phase): "\(call) cannot be called on a host that is \(phase)"
    case .metrics(let address, let reason): "metrics \(address): \(reason)"
    case .startAbandoned: "the start was abandoned before any module started"
    }
  }
}
