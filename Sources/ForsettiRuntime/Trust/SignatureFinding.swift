import ForsettiBinary
import ForsettiCore
import Glibc

/// What a module binary's detached signature (`FILE.so.sig`) is, against the keys trusted for
/// module signatures. Read from the files; what the host does with it is `SignaturePolicy`'s.
package enum SignatureFinding: Sendable, Hashable {
  /// No `FILE.so.sig`.
  case unsigned
  /// `FILE.so.sig` exists but is not a signature file (unreadable, too large, not JSON…).
  case malformed(String)
  /// Signed by a key not trusted for module signatures.
  case untrustedKey(keyID: String)
  /// Signed by a trusted key, and the signature matches the file's exact bytes.
  case valid(keyID: String)
  /// Signed by a trusted key, but the signature does not match the file's bytes (changed since
  /// signing, or a forged signature).
  case mismatch(keyID: String)
  /// The binary itself cannot be read to check it.
  case unreadable

  /// The key the signature names, when it names one.
  package var keyID: String? {
    switch self {
    case .untrustedKey(let k), .valid(let k), .mismatch(let k): k
    case .unsigned, .malformed, .unreadable: nil
    }
  }

  /// A stable one-word name, for JSON.
  package var name: String {
    switch self {
    case .unsigned: "unsigned"
    case .malformed: "malformed"
    case .untrustedKey: "untrustedKey"
    case .valid: "valid"
    case .mismatch: "mismatch"
    case .unreadable: "unreadable"
    }
  }

  /// Reads `binary.sig` and, when its key is trusted, checks it against `binary`'s bytes.
  package static func read(binary: String, trusted: [String: [UInt8]]) -> SignatureFinding {
    let sigPath = ModuleSignature.path(for: binary)
    guard let data = PlainFiles.contents(of: sigPath, limit: 1 << 16) else {
      var st = stat()
      return lstat(sigPath, &st) == 0
        ? .malformed("\(sigPath) cannot be read as a signature file") : .unsigned
    }
    guard let o = (try? JSONParser.parse(data))?.objectValue, let keyID = o["keyID"]?.stringValue,
      let sig = o["signature"]?.stringValue.flatMap(Signatures.unhex)
    else { return .malformed("\(sigPath) is not a signature file ({\"keyID\",\"signature\"})") }
    guard let key = trusted[keyID] else { return .untrustedKey(keyID: keyID) }
    guard let bytes = PlainFiles.contents(of: binary) else { return .unreadable }
    return Signatures.verify(bytes, signature: sig, publicKey: key)
      ? .valid(keyID: keyID) : .mismatch(keyID: keyID)
  }
}
