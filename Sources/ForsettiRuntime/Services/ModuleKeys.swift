import CSodium
import ForsettiBridge
import ForsettiCore
import Glibc
import Synchronization

/// The keys of one module, derived from its master secret; they never leave the host.
struct ModuleKeySet: Sendable {
  /// XChaCha20-Poly1305 key of the crypto service's seal and open.
  let sealKey: [UInt8]
  /// XChaCha20-Poly1305 key of secure storage (distinct from `sealKey`, so a value sealed by
  /// one service never opens in the other).
  let storageKey: [UInt8]
  /// Ed25519 secret key (libsodium's 64-byte form) and its public key.
  let signSecret: [UInt8]
  let signPublic: [UInt8]
}

/// Why a module's keys are not available. Never carries key bytes.
enum ModuleKeyError: Error, Sendable, Hashable, CustomStringConvertible {
  case sodiumUnavailable
  case invalidModuleID(String)
  case directory(path: String, errno: Int32)
  case unreadable(path: String, errno: Int32)
  /// The file is there but is not a key of ours: never replaced, since a new key would make
  /// every value sealed with the old one unreadable.
  case malformed(path: String, size: Int)
  case cannotCreate(path: String, step: String, errno: Int32)
  case derivation(moduleID: String)

  var description: String {
    switch self {
    case .sodiumUnavailable: "libsodium could not be initialised"
    case .invalidModuleID(let id): "module ID \"\(id)\" cannot name a key file"
    case .directory(let p, let e): "key directory \(p): \(SecureFiles.describe(e))"
    case .unreadable(let p, let e): "key file \(p): cannot be read: \(SecureFiles.describe(e))"
    case .malformed(let p, let n):
      "key file \(p) is not a module key (\(n) bytes, expected \(ModuleKeys.fileSize)); it was left as it is: restore it from a backup, or remove it to make a new key (values sealed with the old one are then lost)"
    case .cannotCreate(let p, let step, let e): "key file \(p): \(step) failed: \(SecureFiles.describe(e))"
    case .derivation(let id): "keys of \(id) could not be derived"
    }
  }
}

/// Each module's secret keys, made by the host when first needed and kept beneath the state
/// directory, outside every sandbox; no key ever reaches a module.
///
/// One master secret per module (`keys/<moduleID>.key`, 0600 in a 0700 directory); the keys
/// in use are derived from it with `crypto_kdf_derive_from_key`, one subkey ID and context each.
final class ModuleKeys: Sendable {
  let stateDirectory: String
  /// `keys/` beneath the state directory.
  let directory: String
  private let cache = Mutex<[String: ModuleKeySet]>([:])
  /// Failures already logged: a module retrying a call does not repeat the same host line.
  private let reported = Mutex<Set<ModuleKeyError>>([])

  static let magic: [UInt8] = Array("forsetti-module-key-1\n".utf8)
  static let fileSize = magic.count + Int(crypto_kdf_KEYBYTES)
  private static let ready: Bool = sodium_init() >= 0

  // Subkey IDs and 8-byte contexts: distinct, and fixed forever (changing one changes a key).
  private static let sealSubkey: (UInt64, String) = (1, "fsealkey")
  private static let storageSubkey: (UInt64, String) = (2, "fsecstor")
  private static let signSubkey: (UInt64, String) = (3, "fsignkey")

  init(stateDirectory: String) {
    self.stateDirectory = stateDirectory
    directory = stateDirectory + "/keys"
  }

  /// The key file of `moduleID` (which may not exist yet).
  func path(for moduleID: String) -> String { "\(directory)/\(moduleID).key" }

  /// The keys of `moduleID`, or nil after telling `warn` (once per distinct failure) why not.
  func keys(for moduleID: String, warn: (String, String) -> Void) -> ModuleKeySet? {
    do { return try keys(for: moduleID) } catch {
      let first = reported.withLock { $0.insert(error).inserted }
      if first { warn(moduleID, "module keys unavailable: \(error.description)") }
      return nil
    }
  }

  /// The keys of `moduleID`, made on first need. Serialised, so two first calls make one key.
  func keys(for moduleID: String) throws(ModuleKeyError) -> ModuleKeySet {
    try cache.withLock { (cached: inout [String: ModuleKeySet]) throws(ModuleKeyError) -> ModuleKeySet in
      if let k = cached[moduleID] { return k }
      guard Self.ready else { throw .sodiumUnavailable }
      guard SandboxStorage.isValidKey(moduleID) else { throw .invalidModuleID(moduleID) }
      var master = try loadOrCreate(moduleID)
      defer { sodium_memzero(&master, master.count) }
      let k = try Self.derive(master, moduleID)
      cached[moduleID] = k
      return k
    }
  }

  private func loadOrCreate(_ moduleID: String) throws(ModuleKeyError) -> [UInt8] {
    if let e = SecureFiles.privateDirectory(directory) { throw .directory(path: directory, errno: e) }
    let path = path(for: moduleID)
    // Twice at most: a key another host process linked in between is read the second time.
    for _ in 0..<2 {
      switch SecureFiles.read(path, max: Self.fileSize) {
      case .bytes(let b):
        guard b.count == Self.fileSize, Array(b.prefix(Self.magic.count)) == Self.magic else {
          throw .malformed(path: path, size: b.count)
        }
        return Array(b.dropFirst(Self.magic.count))
      case .tooLarge(let n): throw .malformed(path: path, size: n)
      case .failed(let e): throw .unreadable(path: path, errno: e)
      case .missing:
        if let made = try create(path) { return made }
      }
    }
    throw .cannotCreate(path: path, step: "link", errno: EEXIST)
  }

  /// Writes a new master secret to `path` without ever replacing one: a temporary file, fsync,
  /// then link(2), which fails if `path` exists. Nil when another process made it first.
  private func create(_ path: String) throws(ModuleKeyError) -> [UInt8]? {
    var master = [UInt8](repeating: 0, count: Int(crypto_kdf_KEYBYTES))
    crypto_kdf_keygen(&master)
    var contents = Self.magic + master
    defer { sodium_memzero(&contents, contents.count) }
    let tmp = "\(path).tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    let fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw .cannotCreate(path: path, step: "create temporary file", errno: errno) }
    let written = FileDescriptor.writeAll(fd, contents) && fsync(fd) == 0
    let writeErrno = errno
    close(fd)
    defer { unlink(tmp) }
    guard written else { throw .cannotCreate(path: path, step: "write", errno: writeErrno) }
    guard link(tmp, path) == 0 else {
      if errno == EEXIST {
        sodium_memzero(&master, master.count)
        return nil
      }
      throw .cannotCreate(path: path, step: "link", errno: errno)
    }
    SecureFiles.syncDirectory(directory)
    return master
  }

  private static func derive(_ master: [UInt8], _ moduleID: String) throws(ModuleKeyError) -> ModuleKeySet {
    func subkey(_ spec: (UInt64, String), _ n: Int) -> [UInt8]? {
      var out = [UInt8](repeating: 0, count: n)
      let rc = spec.1.withCString { ctx in crypto_kdf_derive_from_key(&out, n, spec.0, ctx, master) }
      return rc == 0 ? out : nil
    }
    guard let seal = subkey(sealSubkey, Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES)),
      let storage = subkey(storageSubkey, Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES)),
      var seed = subkey(signSubkey, Int(crypto_sign_SEEDBYTES))
    else { throw .derivation(moduleID: moduleID) }
    defer { sodium_memzero(&seed, seed.count) }
    var pk = [UInt8](repeating: 0, count: Int(crypto_sign_PUBLICKEYBYTES))
    var sk = [UInt8](repeating: 0, count: Int(crypto_sign_SECRETKEYBYTES))
    guard crypto_sign_seed_keypair(&pk, &sk, seed) == 0 else { throw .derivation(moduleID: moduleID) }
    return ModuleKeySet(sealKey: seal, storageKey: storage, signSecret: sk, signPublic: pk)
  }
}
