import ForsettiCore
import ForsettiRuntime

/// A capability policy as host.conf and `--policy` give it: `allow-all`, `fixed:CAP,…` (only
/// those), or else the path of a policy file, read now so a bad one is refused before anything
/// is judged (`./allow-all` names a file of that name).
package enum PolicyText {
  package enum Failure: Error, Sendable {
    /// A name in `fixed:` that is no capability; the closest one, if any is close.
    case unknownCapability(String, suggestion: String?)
    /// The policy file cannot be read or decoded.
    case file(JudgeError)

    package var why: String {
      switch self {
      case .unknownCapability(let name, let hint):
        "unknown capability '\(name)'" + (hint.map { "; did you mean '\($0)'?" } ?? "")
      case .file(let e): e.description
      }
    }
  }

  /// The policy, and the file it is read from each time the host judges (nil for the others).
  package static func parse(_ raw: String) throws(Failure) -> (policy: any CapabilityPolicy, file: String?) {
    if raw == "allow-all" { return (AllowAllCapabilityPolicy(), nil) }
    guard raw.hasPrefix("fixed:") || raw == "fixed" else {
      do { return (try Judge.readPolicy(raw), raw) } catch { throw .file(error) }
    }
    var caps = Set<Capability>()
    for name in raw.dropFirst("fixed".count).drop(while: { $0 == ":" }).split(separator: ",").map({
      $0.trimmed()
    })
    where !name.isEmpty {
      guard let cap = Capability(rawValue: name) else {
        throw .unknownCapability(
          name, suggestion: Suggestion.closest(to: name, among: Capability.allCases.map(\.rawValue)))
      }
      caps.insert(cap)
    }
    return (FixedCapabilityPolicy(caps), nil)
  }
}
