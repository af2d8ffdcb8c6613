import ForsettiCore

/// Why the host could not judge at all: an input it was told to read is missing or malformed.
public enum JudgeError: Error, Sendable, Equatable, CustomStringConvertible {
  case manifests(ManifestSourceError)
  /// `setting` names what pointed at the file (`entitlements`, `state`).
  case file(setting: String, path: String, reason: String)

  public var description: String {
    switch self {
    case .manifests(let e): "manifest directory: \(e)"
    case .file(let s, let p, let why): "--\(s) \(p): \(why)"
    }
  }
}
