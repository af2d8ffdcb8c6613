import CForsetti

/// forsetti/services/crypto.h: libsodium with keys the host keeps for this module, so a module
/// can seal and sign without ever holding a secret key.
public struct Crypto: @unchecked Sendable {
  // @unchecked: as SecureStorage.
  let raw: UnsafePointer<forsetti_crypto>

  /// What `seal` adds to the plain text (nonce and tag), for sizing stored records.
  public static let sealOverhead = Int(FORSETTI_CRYPTO_SEAL_OVERHEAD)
  /// The most one input may hold; the whole call crosses to the host in one frame.
  public static let maxInput = Int(FORSETTI_CRYPTO_MAX_INPUT)
  /// Ed25519 sizes, checked here because the C functions read exactly this many bytes.
  public static let signatureBytes = Int(FORSETTI_CRYPTO_SIGNATURE_BYTES)
  /// See `signatureBytes`.
  public static let publicKeyBytes = Int(FORSETTI_CRYPTO_PUBLIC_KEY_BYTES)
  /// The digest lengths BLAKE2b allows; 32 is the usual choice.
  public static let hashLengths = Int(FORSETTI_CRYPTO_HASH_MIN)...Int(FORSETTI_CRYPTO_HASH_MAX)

  /// `count` unpredictable bytes (at most `maxInput`), for nonces, tokens and salts.
  public func randomBytes(_ count: Int) throws(ForsettiError) -> [UInt8] {
    guard let random = raw.pointee.random_bytes else { throw .unavailable }
    guard count >= 0 else { throw .invalidArgument }
    var out = [UInt8](repeating: 0, count: count)
    try ForsettiError.check(out.withUnsafeMutableBytes { random($0.baseAddress, $0.count) })
    return out
  }

  /// The unkeyed BLAKE2b digest of `data`, `length` bytes long (16 to 64).
  public func hash(_ data: [UInt8], length: Int = 32) throws(ForsettiError) -> [UInt8] {
    guard let hash = raw.pointee.hash else { throw .unavailable }
    guard Self.hashLengths.contains(length) else { throw .invalidArgument }
    var digest = [UInt8](repeating: 0, count: length)
    let status = data.withUnsafeBytes { d in
      digest.withUnsafeMutableBytes { hash(d.baseAddress, d.count, $0.baseAddress, $0.count) }
    }
    try ForsettiError.check(status)
    return digest
  }

  /// Encrypts `plain` and authenticates it with `extra` (a context; not encrypted) under this
  /// module's key: only this module can open the result, and only with the same `extra`.
  public func seal(_ plain: [UInt8], extra: [UInt8] = []) throws(ForsettiError) -> [UInt8] {
    guard let seal = raw.pointee.seal else { throw .unavailable }
    let (capacity, overflow) = plain.count.addingReportingOverflow(Self.sealOverhead)
    guard !overflow else { throw .tooLarge }
    return try fill(capacity) { out, length in
      plain.withUnsafeBytes { p in
        extra.withUnsafeBytes { e in
          seal(p.baseAddress, p.count, e.baseAddress, e.count, out.baseAddress, out.count, &length)
        }
      }
    }
  }

  /// Reverses `seal`; `.invalidData` when the bytes or `extra` were altered, or another module
  /// sealed them.
  public func open(_ sealed: [UInt8], extra: [UInt8] = []) throws(ForsettiError) -> [UInt8] {
    guard let open = raw.pointee.open else { throw .unavailable }
    guard sealed.count >= Self.sealOverhead else { throw .invalidData }
    return try fill(sealed.count - Self.sealOverhead) { out, length in
      sealed.withUnsafeBytes { s in
        extra.withUnsafeBytes { e in
          open(s.baseAddress, s.count, e.baseAddress, e.count, out.baseAddress, out.count, &length)
        }
      }
    }
  }

  /// The Ed25519 signature of `message` with this module's key; anyone with `publicKey()` can check it.
  public func sign(_ message: [UInt8]) throws(ForsettiError) -> [UInt8] {
    guard let sign = raw.pointee.sign else { throw .unavailable }
    var signature = [UInt8](repeating: 0, count: Self.signatureBytes)
    let status = message.withUnsafeBytes { m in
      signature.withUnsafeMutableBytes { sign(m.baseAddress, m.count, $0.baseAddress) }
    }
    try ForsettiError.check(status)
    return signature
  }

  /// Whether `signature` over `message` verifies against `publicKey` (any module's, or anyone's);
  /// a wrong-sized key or signature is `.invalidArgument`, never a read past its end.
  public func verify(_ signature: [UInt8], of message: [UInt8], publicKey: [UInt8]) throws(ForsettiError)
    -> Bool
  {
    guard let verify = raw.pointee.verify else { throw .unavailable }
    guard signature.count == Self.signatureBytes, publicKey.count == Self.publicKeyBytes else {
      throw .invalidArgument
    }
    let status = message.withUnsafeBytes { m in
      signature.withUnsafeBytes { s in
        publicKey.withUnsafeBytes { verify(m.baseAddress, m.count, s.baseAddress, $0.baseAddress) }
      }
    }
    if status == FORSETTI_ERR_INVALID_DATA { return false }
    try ForsettiError.check(status)
    return true
  }

  /// This module's Ed25519 public key, to publish for others to verify with.
  public func publicKey() throws(ForsettiError) -> [UInt8] {
    guard let publicKey = raw.pointee.public_key else { throw .unavailable }
    var key = [UInt8](repeating: 0, count: Self.publicKeyBytes)
    try ForsettiError.check(key.withUnsafeMutableBytes { publicKey($0.baseAddress) })
    return key
  }

  /// Runs a seal or open into a buffer of the exact size it needs, trimmed to what was written.
  private func fill(
    _ capacity: Int, _ body: (UnsafeMutableRawBufferPointer, inout Int) -> Int32
  ) throws(ForsettiError) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: capacity)
    var length = 0
    try ForsettiError.check(out.withUnsafeMutableBytes { body($0, &length) })
    guard length >= 0, length <= capacity else { throw .io }
    out.removeSubrange(length...)
    return out
  }
}
