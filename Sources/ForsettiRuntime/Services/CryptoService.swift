import CForsetti
import CSodium
import ForsettiBridge
import ForsettiCore

/// forsetti/services/crypto.h on the host's side: libsodium with the caller's own keys
/// (`ModuleKeys`), which never leave the host.
///
/// Every length is checked again here, since a worker's request is untrusted; `r.capacity` is
/// what the caller can take back, and no reply is larger.
final class CryptoService: Sendable {
  let keys: ModuleKeys
  let warn: @Sendable (String, String) -> Void

  static let maxInput = Int(FORSETTI_CRYPTO_MAX_INPUT)
  static let overhead = Int(FORSETTI_CRYPTO_SEAL_OVERHEAD)
  static let nonceBytes = Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
  static let tagBytes = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)
  static let signatureBytes = Int(FORSETTI_CRYPTO_SIGNATURE_BYTES)
  static let publicKeyBytes = Int(FORSETTI_CRYPTO_PUBLIC_KEY_BYTES)
  static let hashRange = Int(FORSETTI_CRYPTO_HASH_MIN)...Int(FORSETTI_CRYPTO_HASH_MAX)

  init(keys: ModuleKeys, warn: @escaping @Sendable (String, String) -> Void) {
    self.keys = keys
    self.warn = warn
  }

  /// Arguments per operation: random (number = length), hash (number = digest length; data),
  /// seal (plain, extra), open (sealed, extra), sign (message), verify (message, signature ‖
  /// public key), public key (none).
  func answer(_ r: ServiceRequest, from caller: ModuleCaller) -> ServiceReply {
    let input = r.argument(0) ?? []
    let extra = r.argument(1) ?? []
    switch r.operation {
    case .cryptoRandom:
      guard r.number >= 0, r.number <= Int64(Self.maxInput), Int(r.number) <= r.capacity else {
        return .status(FORSETTI_ERR_INVALID_ARGUMENT)
      }
      var out = [UInt8](repeating: 0, count: Int(r.number))
      randombytes_buf(&out, out.count)
      return ServiceReply(FORSETTI_OK, out)
    case .cryptoHash:
      guard r.number >= Int64(Self.hashRange.lowerBound), r.number <= Int64(Self.hashRange.upperBound),
        Int(r.number) <= r.capacity
      else { return .status(FORSETTI_ERR_INVALID_ARGUMENT) }
      guard input.count <= Self.maxInput else { return .status(FORSETTI_ERR_TOO_LARGE) }
      var digest = [UInt8](repeating: 0, count: Int(r.number))
      guard crypto_generichash(&digest, digest.count, input, UInt64(input.count), nil, 0) == 0 else {
        return .status(FORSETTI_ERR_IO)
      }
      return ServiceReply(FORSETTI_OK, digest)
    case .cryptoSeal: return seal(input, extra, capacity: r.capacity, caller.moduleID)
    case .cryptoOpen: return open(input, extra, capacity: r.capacity, caller.moduleID)
    case .cryptoSign:
      guard input.count <= Self.maxInput else { return .status(FORSETTI_ERR_TOO_LARGE) }
      guard r.capacity >= Self.signatureBytes else { return .status(FORSETTI_ERR_INVALID_ARGUMENT) }
      guard let k = keys.keys(for: caller.moduleID, warn: warn) else { return .status(FORSETTI_ERR_IO) }
      var signature = [UInt8](repeating: 0, count: Self.signatureBytes)
      guard crypto_sign_detached(&signature, nil, input, UInt64(input.count), k.signSecret) == 0 else {
        return .status(FORSETTI_ERR_IO)
      }
      return ServiceReply(FORSETTI_OK, signature)
    case .cryptoVerify:
      guard input.count <= Self.maxInput else { return .status(FORSETTI_ERR_TOO_LARGE) }
      guard extra.count == Self.signatureBytes + Self.publicKeyBytes else {
        return .status(FORSETTI_ERR_INVALID_ARGUMENT)
      }
      let signature = Array(extra.prefix(Self.signatureBytes))
      let key = Array(extra.dropFirst(Self.signatureBytes))
      let ok = crypto_sign_verify_detached(signature, input, UInt64(input.count), key) == 0
      return .status(ok ? FORSETTI_OK : FORSETTI_ERR_INVALID_DATA)
    case .cryptoPublicKey:
      guard r.capacity >= Self.publicKeyBytes else { return .status(FORSETTI_ERR_INVALID_ARGUMENT) }
      guard let k = keys.keys(for: caller.moduleID, warn: warn) else { return .status(FORSETTI_ERR_IO) }
      return ServiceReply(FORSETTI_OK, k.signPublic)
    default: return .status(FORSETTI_ERR_INVALID_ARGUMENT)
    }
  }

  /// nonce ‖ ciphertext ‖ tag, with a fresh random nonce (XChaCha20's 24 bytes make a
  /// collision negligible however many values a module seals).
  private func seal(_ plain: [UInt8], _ extra: [UInt8], capacity: Int, _ moduleID: String) -> ServiceReply {
    guard plain.count + extra.count <= Self.maxInput else { return .status(FORSETTI_ERR_TOO_LARGE) }
    let needed = plain.count + Self.overhead
    guard needed <= capacity else { return ServiceReply(FORSETTI_ERR_BUFFER_TOO_SMALL, length: needed) }
    guard let k = keys.keys(for: moduleID, warn: warn) else { return .status(FORSETTI_ERR_IO) }
    var nonce = [UInt8](repeating: 0, count: Self.nonceBytes)
    randombytes_buf(&nonce, nonce.count)
    var sealed = [UInt8](repeating: 0, count: plain.count + Self.tagBytes)
    var sealedLength: UInt64 = 0
    let rc = crypto_aead_xchacha20poly1305_ietf_encrypt(
      &sealed, &sealedLength, plain, UInt64(plain.count), extra, UInt64(extra.count), nil, nonce, k.sealKey)
    guard rc == 0 else { return .status(FORSETTI_ERR_IO) }
    return ServiceReply(FORSETTI_OK, nonce + sealed)
  }

  private func open(_ sealed: [UInt8], _ extra: [UInt8], capacity: Int, _ moduleID: String) -> ServiceReply {
    guard sealed.count + extra.count <= Self.maxInput + Self.overhead else {
      return .status(FORSETTI_ERR_TOO_LARGE)
    }
    guard sealed.count >= Self.overhead else { return .status(FORSETTI_ERR_INVALID_DATA) }
    let needed = sealed.count - Self.overhead
    guard needed <= capacity else { return ServiceReply(FORSETTI_ERR_BUFFER_TOO_SMALL, length: needed) }
    guard let k = keys.keys(for: moduleID, warn: warn) else { return .status(FORSETTI_ERR_IO) }
    let nonce = Array(sealed.prefix(Self.nonceBytes))
    let body = Array(sealed.dropFirst(Self.nonceBytes))
    var plain = [UInt8](repeating: 0, count: needed)
    var plainLength: UInt64 = 0
    let rc = crypto_aead_xchacha20poly1305_ietf_decrypt(
      &plain, &plainLength, nil, body, UInt64(body.count), extra, UInt64(extra.count), nonce, k.sealKey)
    guard rc == 0 else { return .status(FORSETTI_ERR_INVALID_DATA) }
    return ServiceReply(FORSETTI_OK, plain)
  }
}
