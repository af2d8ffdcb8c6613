import CForsetti
import CSodium
import ForsettiBridge
import ForsettiCore
import Glibc

/// forsetti/services/secure_storage.h on the host's side.
///
/// A value lives in `secure/<moduleID>/<key>` beneath the state directory (outside every
/// sandbox) as `magic ‖ nonce ‖ XChaCha20-Poly1305(value)`, with the magic, the module ID and
/// the key as associated data: a file moved to another key or module does not authenticate.
/// The files of one module together are bounded by `quota`.
final class SecureStorageService: Sendable {
  let stateDirectory: String
  let keys: ModuleKeys
  let warn: @Sendable (String, String) -> Void
  /// The bytes of each module's sealed files (`--storage-quota`).
  let quota: QuotaLedger

  static let magic: [UInt8] = Array("FSS1".utf8)
  static let nonceBytes = Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
  static let tagBytes = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)
  static let maxValue = Int(FORSETTI_SECURE_STORAGE_MAX_VALUE)
  static let maxFile = magic.count + nonceBytes + maxValue + tagBytes

  init(
    stateDirectory: String, keys: ModuleKeys, quotaBytes: Int,
    warn: @escaping @Sendable (String, String) -> Void
  ) {
    self.stateDirectory = stateDirectory
    self.keys = keys
    self.warn = warn
    quota = QuotaLedger(Quota(service: "secure storage", bytes: quotaBytes, option: "storage-quota")) {
      QuotaLedger.bytes(in: "\(stateDirectory)/secure/\($0)")
    }
  }

  /// `secure/<moduleID>` beneath the state directory.
  func directory(for moduleID: String) -> String { "\(stateDirectory)/secure/\(moduleID)" }

  /// Arguments: the key, and for `set` the value. Everything is checked again here: a
  /// worker's request is untrusted.
  func answer(_ r: ServiceRequest, from caller: ModuleCaller) -> ServiceReply {
    guard let key = r.text(0, max: Int(FORSETTI_SECURE_STORAGE_MAX_KEY)), SandboxStorage.isValidKey(key),
      SandboxStorage.isValidKey(caller.moduleID)
    else { return .status(FORSETTI_ERR_INVALID_ARGUMENT) }
    let path = "\(directory(for: caller.moduleID))/\(key)"
    switch r.operation {
    case .secureSet:
      guard let value = r.argument(1) else { return .status(FORSETTI_ERR_INVALID_ARGUMENT) }
      return .status(set(value, at: path, key: key, caller.moduleID))
    case .secureGet: return get(path, key: key, capacity: r.capacity, caller.moduleID)
    case .secureRemove:
      return .status(
        quota.withMeter(caller.moduleID) { meter in
          let old = Self.size(of: path)
          guard unlink(path) == 0 else { return errno == ENOENT ? FORSETTI_ERR_NOT_FOUND : FORSETTI_ERR_IO }
          meter.record(old: old, new: nil)
          return FORSETTI_OK
        })
    default: return .status(FORSETTI_ERR_INVALID_ARGUMENT)
    }
  }

  private func set(_ value: [UInt8], at path: String, key: String, _ moduleID: String) -> Int32 {
    guard value.count <= Self.maxValue else { return FORSETTI_ERR_TOO_LARGE }
    guard let k = keys.keys(for: moduleID, warn: warn) else { return FORSETTI_ERR_IO }
    let dir = directory(for: moduleID)
    if let e = SecureFiles.privateDirectory(dir) {
      warn(moduleID, "secure storage directory \(dir): \(SecureFiles.describe(e))")
      return FORSETTI_ERR_IO
    }
    var nonce = [UInt8](repeating: 0, count: Self.nonceBytes)
    randombytes_buf(&nonce, nonce.count)
    let ad = Self.associatedData(moduleID, key)
    var sealed = [UInt8](repeating: 0, count: value.count + Self.tagBytes)
    var sealedLength: UInt64 = 0
    let rc = crypto_aead_xchacha20poly1305_ietf_encrypt(
      &sealed, &sealedLength, value, UInt64(value.count), ad, UInt64(ad.count), nil, nonce, k.storageKey)
    guard rc == 0 else { return FORSETTI_ERR_IO }
    let file = Self.magic + nonce + sealed
    return quota.withMeter(moduleID) { meter in
      let old = Self.size(of: path)
      guard meter.admits(old: old, new: file.count) else {
        // A module hammering at its quota is told of once, not once a call.
        if meter.tellRefusal() { warn(moduleID, meter.quota.reached(by: moduleID)) }
        return FORSETTI_ERR_QUOTA
      }
      do throws(AtomicFile.WriteError) {
        try AtomicFile.write(file, to: path, mode: 0o600)
      } catch {
        warn(moduleID, "secure value \(key) was not stored: \(error.description)")
        return FORSETTI_ERR_IO
      }
      meter.record(old: old, new: file.count)
      return FORSETTI_OK
    }
  }

  /// The size of the regular file at `path`, nil when there is none (a link is not followed).
  static func size(of path: String) -> Int? {
    var st = stat()
    guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return nil }
    return Int(st.st_size)
  }

  private func get(_ path: String, key: String, capacity: Int, _ moduleID: String) -> ServiceReply {
    let file: [UInt8]
    switch SecureFiles.read(path, max: Self.maxFile) {
    case .missing: return .status(FORSETTI_ERR_NOT_FOUND)
    case .tooLarge: return .status(FORSETTI_ERR_INVALID_DATA)
    case .failed(let e):
      warn(moduleID, "secure value \(key) cannot be read: \(SecureFiles.describe(e))")
      return .status(FORSETTI_ERR_IO)
    case .bytes(let b): file = b
    }
    let header = Self.magic.count + Self.nonceBytes
    guard file.count >= header + Self.tagBytes, file.prefix(Self.magic.count).elementsEqual(Self.magic) else {
      return .status(FORSETTI_ERR_INVALID_DATA)
    }
    guard let k = keys.keys(for: moduleID, warn: warn) else { return .status(FORSETTI_ERR_IO) }
    let nonce = Array(file[Self.magic.count..<header])
    let sealed = Array(file[header...])
    let ad = Self.associatedData(moduleID, key)
    var plain = [UInt8](repeating: 0, count: sealed.count - Self.tagBytes)
    var plainLength: UInt64 = 0
    let rc = crypto_aead_xchacha20poly1305_ietf_decrypt(
      &plain, &plainLength, nil, sealed, UInt64(sealed.count), ad, UInt64(ad.count), nonce, k.storageKey)
    guard rc == 0 else { return .status(FORSETTI_ERR_INVALID_DATA) }
    guard plain.count <= capacity else {
      sodium_memzero(&plain, plain.count)
      return ServiceReply(FORSETTI_ERR_BUFFER_TOO_SMALL, length: plain.count)
    }
    return ServiceReply(FORSETTI_OK, plain)
  }

  /// What binds a value to its place: the format, the module and the key (neither can hold a
  /// NUL, so the separator makes the encoding unambiguous).
  static func associatedData(_ moduleID: String, _ key: String) -> [UInt8] {
    magic + Array(moduleID.utf8) + [0] + Array(key.utf8)
  }
}
