import Dispatch
import ForsettiSDK
import Glibc
import Synchronization

/// A service module that uses every host service of ABI 1.1 from Swift, and says what each did
/// in one `toolbox: …` log line, so a reader (and Tests/ForsettiCLITests/ToolboxExampleTests.swift)
/// can follow it: secure storage, crypto, file export, diagnostics, serving the `api` role and
/// calling the `shared_database` role of Plugins/SharedDatabase.
final class Toolbox: ForsettiModule, Sendable {
  static let identity = ModuleIdentity("com.example.toolbox", kind: .service, version: (0, 1, 0))

  private let queue = DispatchQueue(label: "com.example.toolbox.calls")
  private let running = Atomic<Bool>(false)
  private let api = Mutex<RoleService?>(nil)

  required init() {}

  func start(_ host: Host) throws(ForsettiError) {
    guard let secrets = host.secureStorage, let crypto = host.crypto, let diagnostics = host.diagnostics,
      let api = host.role(.api)
    else { throw .denied }
    // The capabilities it did not request give no table; `storage` is one of them.
    host.log("toolbox: storage (not requested): \(host.storage == nil ? "nil" : "a table")")

    let starts = try countStart(secrets)
    host.log("toolbox: secure storage: start number \(starts)")
    try rememberSecret(secrets, crypto, host)
    let digest = try useCrypto(crypto, host)
    exportReport(host, starts: starts, digest: digest)

    // Serve before anything calls: a consumer's call before `serve` gets `.unavailable`.
    try api.serve { call throws(ForsettiError) in try Self.answer(call, crypto) }
    self.api.withLock { $0 = api }
    host.log("toolbox: serving the api role")
    // The holder of a role serves it and cannot call it: the host refuses with `.denied`.
    do throws(ForsettiError) {
      _ = try api.call("hash", text: "self")
      host.log("toolbox: calling its own role: answered (unexpected)")
    } catch {
      host.log("toolbox: calling its own role: \(error.name)")
    }

    try diagnostics.setCounter("toolbox.starts", Int64(starts))
    try diagnostics.report(.ok, "every service answered at start \(starts)")
    host.log("toolbox: diagnostics: reported ok")

    // Role calls may wait up to 10 s: never in start.
    running.store(true, ordering: .releasing)
    if let db = host.role(.sharedDatabase) {
      queue.async { self.useSharedDatabase(db, host, starts: starts) }
    } else {
      host.log("toolbox: shared database: no table")
    }
  }

  /// The start count, kept sealed: it survives restarts, and the sandbox holds no plain copy.
  private func countStart(_ secrets: SecureStorage) throws(ForsettiError) -> Int {
    let starts = (Int(try secrets.string("toolbox.starts") ?? "0") ?? 0) + 1
    try secrets.set("toolbox.starts", string: String(starts))
    return starts
  }

  /// A secret made once and unsealed at every later start; logged by fingerprint only.
  private func rememberSecret(_ secrets: SecureStorage, _ crypto: Crypto, _ host: Host) throws(ForsettiError)
  {
    let existing: [UInt8]?
    do throws(ForsettiError) {
      existing = try secrets.get("toolbox.secret")
    } catch .invalidData {
      host.log("toolbox: secure storage: the stored secret does not authenticate; making a new one")
      existing = nil
    }
    let secret: [UInt8]
    if let existing {
      secret = existing
    } else {
      secret = try crypto.randomBytes(32)
      try secrets.set("toolbox.secret", secret)
    }
    let fingerprint = hex(try crypto.hash(secret, length: 16))
    host.log("toolbox: secure storage: secret \(existing == nil ? "sealed" : "unsealed") \(fingerprint)")
  }

  /// Hash, random, seal and open (and a refused open), sign and verify; returns the digest.
  private func useCrypto(_ crypto: Crypto, _ host: Host) throws(ForsettiError) -> [UInt8] {
    let digest = try crypto.hash(Array("hello, toolbox".utf8))
    host.log("toolbox: crypto: blake2b-256(\"hello, toolbox\") = \(hex(digest))")
    let nonce = try crypto.randomBytes(16)
    host.log("toolbox: crypto: \(nonce.count) random bytes")

    let plain = Array("cached session".utf8)
    let context = Array("toolbox/v1".utf8)
    let sealed = try crypto.seal(plain, extra: context)
    let opened = try crypto.open(sealed, extra: context)
    host.log(
      "toolbox: crypto: sealed \(plain.count) bytes into \(sealed.count), opened \(opened == plain ? "equal" : "different")"
    )
    do throws(ForsettiError) {
      _ = try crypto.open(sealed, extra: Array("another context".utf8))
      host.log("toolbox: crypto: open with another context: opened (unexpected)")
    } catch {
      host.log("toolbox: crypto: open with another context: \(error.name)")
    }

    let signature = try crypto.sign(digest)
    let key = try crypto.publicKey()
    var altered = digest
    altered[0] ^= 1
    let good = try crypto.verify(signature, of: digest, publicKey: key)
    let bad = try crypto.verify(signature, of: altered, publicKey: key)
    host.log(
      "toolbox: crypto: signature verifies: \(good), over altered bytes: \(bad); public key \(hex(key))")
    return digest
  }

  /// A report for the operator; without `--export-dir` the typed error says so.
  private func exportReport(_ host: Host, starts: Int, digest: [UInt8]) {
    guard let export = host.fileExport else { return }
    do throws(ForsettiError) {
      let path = try export.write("toolbox-report.txt", text: "toolbox report\n")
      try export.write("toolbox-report.txt", text: "start \(starts): \(hex(digest))\n", mode: .append)
      host.log("toolbox: file export: wrote \(path)")
    } catch {
      host.log("toolbox: file export: \(error.name)")
    }
  }

  /// The api role's methods; an unknown one is `.invalidArgument`, so a newer consumer can tell.
  private static func answer(_ call: RoleCall, _ crypto: Crypto) throws(ForsettiError) -> [UInt8] {
    switch call.method {
    case "whoami": Array(call.caller.utf8)
    case "hash": try crypto.hash(call.request)
    case "public-key": try crypto.publicKey()
    default: throw .invalidArgument
    }
  }

  /// Writes a row of its own in the shared database and reads it back, retrying while the
  /// provider is not serving yet.
  private func useSharedDatabase(_ db: RoleService, _ host: Host, starts: Int) {
    let value = "start \(starts)"
    for _ in 0..<200 {
      guard running.load(ordering: .acquiring) else { return }
      do throws(ForsettiError) {
        _ = try db.call("put", Array("toolbox.last-start".utf8) + [0] + Array(value.utf8))
        let back = try db.call("get", text: "toolbox.last-start")
        host.log(
          "toolbox: shared database: toolbox.last-start = \"\(String(decoding: back, as: UTF8.self))\"")
        do throws(ForsettiError) {
          _ = try db.call("get", text: "title")
          host.log("toolbox: shared database: title found (unexpected: Toolbox wrote none)")
        } catch {
          host.log("toolbox: shared database: get title: \(error.name)")
        }
        return
      } catch .unavailable, .timeout {
        usleep(250_000)
      } catch {
        host.log("toolbox: shared database: \(error.name)")
        return
      }
    }
    host.log("toolbox: shared database: never answered")
  }

  func stop() {
    try? api.withLock { $0 }?.stopServing()
    // End the call thread before returning, so no host call happens after stop.
    running.store(false, ordering: .releasing)
    queue.sync {}
  }
}

/// Lower-case hex, for digests and keys in log lines.
private func hex(_ bytes: [UInt8]) -> String {
  let digits = Array("0123456789abcdef")
  return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xf)]] })
}

@_cdecl("toolbox_module_entry") public func toolboxModuleEntry(_ abi: UInt32) -> UnsafeRawPointer? {
  Forsetti.export(Toolbox.self, hostABI: abi)
}
