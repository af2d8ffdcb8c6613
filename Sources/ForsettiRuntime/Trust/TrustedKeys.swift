import ForsettiBinary
import ForsettiCore

/// What a vendor key is trusted for. Kept apart so that trusting a vendor to sign licences
/// never makes the host demand signatures from every other vendor's modules.
public enum TrustRole: String, Sendable, Hashable, CaseIterable {
  /// Licences (`STATE/licences/*.licence`) signed by the key unlock products.
  case licences
  /// Module binaries signed by the key (`FILE.so.sig`) count as signed by a trusted vendor.
  case modules
}

/// One `*.pub` file under `STATE/trusted-keys/`: its role (nil: directly in `trusted-keys/`,
/// trusted for nothing) and its key ID (nil: the file does not read as a key, so it is ignored).
public struct TrustedKeyFile: Sendable, Hashable {
  public var path: String
  public var role: TrustRole?
  public var keyID: String?
}

/// The trusted vendor keys of a state directory, by role: `STATE/trusted-keys/ROLE/*.pub`.
public enum TrustedKeys {
  /// `STATE/trusted-keys`.
  public static func root(stateDirectory: String) -> String {
    PathText.join(stateDirectory.isEmpty ? "." : stateDirectory, "trusted-keys")
  }

  /// `STATE/trusted-keys/ROLE`.
  public static func directory(_ role: TrustRole, stateDirectory: String) -> String {
    PathText.join(root(stateDirectory: stateDirectory), role.rawValue)
  }

  /// The keys trusted for `role`, by key ID.
  public static func keys(_ role: TrustRole, stateDirectory: String) -> [String: [UInt8]] {
    Signatures.trustedKeys(in: directory(role, stateDirectory: stateDirectory))
  }

  /// Every `*.pub` of the state directory: each role's, then those directly in `trusted-keys/`.
  public static func files(stateDirectory: String) -> [TrustedKeyFile] {
    func list(_ dir: String, _ role: TrustRole?) -> [TrustedKeyFile] {
      (PlainFiles.names(in: dir) ?? []).filter { $0.hasSuffix(".pub") }.sorted().map { name in
        let path = PathText.join(dir, name)
        let key = try? Signatures.readPublic(path)
        return TrustedKeyFile(path: path, role: role, keyID: key.map(Signatures.keyID))
      }
    }
    return TrustRole.allCases.flatMap { list(directory($0, stateDirectory: stateDirectory), $0) }
      + list(root(stateDirectory: stateDirectory), nil)
  }

  /// The `*.pub` files directly in `STATE/trusted-keys/`: trusted for nothing.
  public static func roleless(stateDirectory: String) -> [String] {
    let dir = root(stateDirectory: stateDirectory)
    return (PlainFiles.names(in: dir) ?? []).filter { $0.hasSuffix(".pub") }.sorted().map {
      PathText.join(dir, $0)
    }
  }

  /// What the host says of a role-less key: that it counts for nothing, and how to give it a role.
  public static func rolelessWarning(_ path: String, stateDirectory: String) -> String {
    "\(path) is trusted for nothing: a key is trusted for licences (trusted-keys/licences/) or for module signatures (trusted-keys/modules/); install it with `forsetti-host trust \(path) --for licences|modules --state \(stateDirectory.isEmpty ? "." : stateDirectory)`, then delete it"
  }
}
