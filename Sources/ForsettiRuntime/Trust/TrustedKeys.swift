import ForsettiBinary
import ForsettiBridge
import ForsettiCore
import FoundationEssentials

/// What a vendor key is trusted for. Kept apart so that trusting a vendor to sign licences
/// never makes the host demand signatures from every other vendor's modules.
package enum TrustRole: String, Sendable, Hashable, CaseIterable {
  /// Licences (`STATE/licences/*.licence`) signed by the key unlock products.
  case licences
  /// Module binaries signed by the key (`FILE.so.sig`) count as signed by a trusted vendor.
  case modules
}

/// One `*.pub` file under `STATE/trusted-keys/`: its role (nil: directly in `trusted-keys/`,
/// trusted for nothing) and its key ID (nil: the file does not read as a key, so it is ignored).
package struct TrustedKeyFile: Sendable, Hashable {
  package var path: String
  package var role: TrustRole?
  package var keyID: String?
}

/// The trusted vendor keys of a state directory, by role: `STATE/trusted-keys/ROLE/*.pub`.
package enum TrustedKeys {
  /// `STATE/trusted-keys`.
  package static func root(stateDirectory: String) -> String {
    PathText.join(stateDirectory.isEmpty ? "." : stateDirectory, "trusted-keys")
  }

  /// `STATE/trusted-keys/ROLE`.
  package static func directory(_ role: TrustRole, stateDirectory: String) -> String {
    PathText.join(root(stateDirectory: stateDirectory), role.rawValue)
  }

  /// The keys trusted for `role`, by key ID.
  package static func keys(_ role: TrustRole, stateDirectory: String) -> [String: [UInt8]] {
    Signatures.trustedKeys(in: directory(role, stateDirectory: stateDirectory))
  }

  /// Every `*.pub` of the state directory: each role's, then those directly in `trusted-keys/`.
  package static func files(stateDirectory: String) -> [TrustedKeyFile] {
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
  package static func roleless(stateDirectory: String) -> [String] {
    let dir = root(stateDirectory: stateDirectory)
    return (PlainFiles.names(in: dir) ?? []).filter { $0.hasSuffix(".pub") }.sorted().map {
      PathText.join(dir, $0)
    }
  }

  /// What the host says of a role-less key: that it counts for nothing, and how to give it a role.
  package static func rolelessWarning(_ path: String, stateDirectory: String) -> String {
    "\(path) is trusted for nothing: a key is trusted for licences (trusted-keys/licences/) or for module signatures (trusted-keys/modules/); install it with `forsetti-host trust \(path) --for licences|modules --state \(stateDirectory.isEmpty ? "." : stateDirectory)`, then delete it"
  }

  /// What `install` did.
  package enum Installed: String, Sendable, Hashable {
    /// The key was written.
    case installed
    /// The same key was already there under that name.
    case alreadyTrusted
  }

  /// Why `install` changed nothing.
  package enum InstallError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The name holds a different key (`present`, its key ID) or a file that is not a key (nil).
    case conflict(path: String, present: String?)
    case lock(StateTransaction.LockError)
    case write(AtomicFile.WriteError)

    package var description: String {
      switch self {
      case .conflict(let path, let present):
        "\(path): already holds \(present.map { "a different key, \($0)" } ?? "a file that is not a key")"
      case .lock(let e): e.description
      case .write(let e): e.description
      }
    }
  }

  /// Writes `key` as `STATE/trusted-keys/ROLE/NAME` in one transaction: the name is checked
  /// and written under `STATE/state.lock`, so two installs of different keys under one name
  /// cannot both say "installed" while one overwrites the other.
  package static func install(_ key: [UInt8], name: String, role: TrustRole, stateDirectory: String)
    throws(InstallError) -> (path: String, result: Installed)
  {
    let target = PathText.join(directory(role, stateDirectory: stateDirectory), name)
    return try StateTransaction.run(stateDirectory: stateDirectory, lockFailed: InstallError.lock) {
      () throws(InstallError) in
      if FileManager.default.fileExists(atPath: target) {
        let present = try? Signatures.readPublic(target)
        guard present == key else { throw .conflict(path: target, present: present.map(Signatures.keyID)) }
        return (target, .alreadyTrusted)
      }
      do throws(AtomicFile.WriteError) {
        try StateTransaction.write(Array((Signatures.hex(key) + "\n").utf8), to: target, mode: 0o644)
      } catch {
        throw .write(error)
      }
      return (target, .installed)
    }
  }
}
