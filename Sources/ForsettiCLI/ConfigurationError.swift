import ForsettiCore

/// A file or directory named on the command line that cannot be used.
public enum ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
  case manifests(ManifestSourceError)
  case file(option: String, path: String, reason: String)
  case directory(option: String, path: String, reason: String)
  case workerMissing(path: String, reason: String)
  /// This image was started by an upgrade whose handover it cannot take (`Handover.Refusal`).
  case handover(String)
  /// No Forsetti installation (forsetti.pc, the Swift SDK) where `new` looked.
  case noInstallation(looked: String, missing: String)

  public var description: String {
    switch self {
    case .manifests(let e): "manifest directory: \(e)"
    case .handover(let why): "upgrade: \(why); the host stops (its service manager starts it again)"
    case .file(let o, let p, let why): "--\(o) \(p): \(why)"
    case .directory(let o, let p, let why): "--\(o) \(p): \(why)"
    case .noInstallation(let dir, let missing):
      "no Forsetti installation at \(dir) (\(missing) is missing); install one with `scripts/install --prefix DIR` and pass --prefix DIR"
    case .workerMissing(let p, let why):
      "the worker executable \(p) \(why); \(why == "is missing" ? "build it with `swift build --product forsetti-worker`" : "put it where this user can run it"), or pass --in-process"
    }
  }
}

/// Why a command could not run at all (exit status 2).
public enum CommandFailure: Error, Sendable, Equatable {
  case usage(UsageError)
  case configuration(ConfigurationError)
  /// A control answer's failure (a host's, or the same computed on the files).
  case control(ControlFailure)
  /// Several settings wrong at once, each told (`SettingChecks`).
  indirect case several([CommandFailure])
}
