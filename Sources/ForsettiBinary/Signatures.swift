import CSodium
import ForsettiCore
import Glibc

/// Ed25519 keys and detached signatures (libsodium). Keys are files of lowercase hex: a public
/// key `NAME.pub` (32 bytes) and a secret key `NAME.key` (64 bytes, mode 0600). A key's ID is
/// the first 16 hex digits of its public key.
public enum Signatures {
  public enum KeyError: Error, Sendable, CustomStringConvertible {
    case unreadable(String)
    case unwritable(String)
    case malformed(String, expected: Int)
    case sodium

    public var description: String {
      switch self {
      case .unreadable(let p): "\(p): cannot be read"
      case .unwritable(let p): "\(p): cannot be written"
      case .malformed(let p, let n): "\(p): not a key (expected \(n) bytes as hex)"
      case .sodium: "libsodium could not be initialised"
      }
    }
  }

  private static let ready: Bool = sodium_init() >= 0

  public static func hex(_ b: [UInt8]) -> String {
    b.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
  }

  public static func unhex(_ s: String) -> [UInt8]? {
    let space: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0D]
    var chars = Array(s.utf8)[...]
    while let c = chars.first, space.contains(c) { chars.removeFirst() }
    while let c = chars.last, space.contains(c) { chars.removeLast() }
    let hex = Array(chars)
    guard hex.count % 2 == 0 else { return nil }
    var out: [UInt8] = []
    out.reserveCapacity(hex.count / 2)
    var i = 0
    while i < hex.count {
      guard let hi = nibble(hex[i]), let lo = nibble(hex[i + 1]) else { return nil }
      out.append(hi << 4 | lo)
      i += 2
    }
    return out
  }

  private static func nibble(_ c: UInt8) -> UInt8? {
    switch c {
    case 0x30...0x39: c - 0x30
    case 0x61...0x66: c - 0x61 + 10
    case 0x41...0x46: c - 0x41 + 10
    default: nil
    }
  }

  /// A new key pair: (public, secret).
  public static func generate() throws(KeyError) -> (public: [UInt8], secret: [UInt8]) {
    guard ready else { throw .sodium }
    var pk = [UInt8](repeating: 0, count: Int(crypto_sign_PUBLICKEYBYTES))
    var sk = [UInt8](repeating: 0, count: Int(crypto_sign_SECRETKEYBYTES))
    crypto_sign_keypair(&pk, &sk)
    return (pk, sk)
  }

  public static func keyID(_ publicKey: [UInt8]) -> String { String(hex(publicKey).prefix(16)) }

  /// The public key matching a secret key (libsodium keeps it in the second half).
  public static func publicKey(ofSecret sk: [UInt8]) -> [UInt8] {
    Array(sk.suffix(Int(crypto_sign_PUBLICKEYBYTES)))
  }

  public static func readKey(_ path: String, bytes: Int) throws(KeyError) -> [UInt8] {
    guard let data = PlainFiles.contents(of: path, limit: 4096) else { throw .unreadable(path) }
    let text = String(decoding: data, as: UTF8.self)
    guard let b = unhex(text), b.count == bytes else { throw .malformed(path, expected: bytes) }
    return b
  }

  public static func readPublic(_ path: String) throws(KeyError) -> [UInt8] {
    try readKey(path, bytes: Int(crypto_sign_PUBLICKEYBYTES))
  }

  public static func readSecret(_ path: String) throws(KeyError) -> [UInt8] {
    try readKey(path, bytes: Int(crypto_sign_SECRETKEYBYTES))
  }

  public static func sign(_ message: [UInt8], secret: [UInt8]) throws(KeyError) -> [UInt8] {
    guard ready else { throw .sodium }
    var sig = [UInt8](repeating: 0, count: Int(crypto_sign_BYTES))
    crypto_sign_detached(&sig, nil, message, UInt64(message.count), secret)
    return sig
  }

  public static func verify(_ message: [UInt8], signature: [UInt8], publicKey: [UInt8]) -> Bool {
    guard ready, signature.count == Int(crypto_sign_BYTES), publicKey.count == Int(crypto_sign_PUBLICKEYBYTES)
    else {
      return false
    }
    return crypto_sign_verify_detached(signature, message, UInt64(message.count), publicKey) == 0
  }

  /// Every `*.pub` in `directory`, by key ID.
  public static func trustedKeys(in directory: String) -> [String: [UInt8]] {
    guard let names = PlainFiles.names(in: directory) else { return [:] }
    var out: [String: [UInt8]] = [:]
    for n in names where n.hasSuffix(".pub") {
      if let k = try? readPublic(directory.hasSuffix("/") ? directory + n : directory + "/" + n) {
        out[keyID(k)] = k
      }
    }
    return out
  }
}

/// A module binary's detached signature: `FILE.so.sig`, JSON `{"keyID","signature"}` over the
/// file's exact bytes. Detached, so signing never changes the binary a vendor tested.
public enum ModuleSignature {
  public static func path(for binary: String) -> String { binary + ".sig" }

  public enum Verdict: Sendable, Equatable {
    case valid(keyID: String)
    case unsigned
    case invalid(String)
  }

  /// Checks `binary` against `trusted` keys (key ID → public key).
  public static func verify(_ binary: String, trusted: [String: [UInt8]]) -> Verdict {
    guard let sigData = PlainFiles.contents(of: path(for: binary), limit: 1 << 16) else {
      // Absent is unsigned; present but unreadable, too large or not a file is a bad signature.
      var st = stat()
      return lstat(path(for: binary), &st) == 0
        ? .invalid("\(path(for: binary)) cannot be read as a signature file") : .unsigned
    }
    guard let o = (try? JSONParser.parse(sigData))?.objectValue, let keyID = o["keyID"]?.stringValue,
      let sig = o["signature"]?.stringValue.flatMap(Signatures.unhex)
    else { return .invalid("\(path(for: binary)) is not a signature file") }
    guard let key = trusted[keyID] else {
      return .invalid("signed by key \(keyID), which is not trusted here")
    }
    guard let bytes = PlainFiles.contents(of: binary) else {
      return .invalid("\(binary) cannot be read")
    }
    return Signatures.verify(bytes, signature: sig, publicKey: key)
      ? .valid(keyID: keyID)
      : .invalid("the signature by key \(keyID) does not match the file's bytes (changed since signing?)")
  }

  /// Writes `binary.sig`.
  public static func sign(_ binary: String, secret: [UInt8]) throws -> String {
    guard let bytes = PlainFiles.contents(of: binary) else {
      throw Signatures.KeyError.unreadable(binary)
    }
    let sig = try Signatures.sign(bytes, secret: secret)
    let doc = JSONValue.object(
      JSONObject([
        ("keyID", .string(Signatures.keyID(Signatures.publicKey(ofSecret: secret)))),
        ("signature", .string(Signatures.hex(sig))),
      ]))
    guard
      PlainFiles.writeAtomically(
        Array((JSONWriter.string(doc, pretty: true) + "\n").utf8), to: path(for: binary))
    else { throw Signatures.KeyError.unwritable(path(for: binary)) }
    return path(for: binary)
  }
}
