import CForsetti
import ForsettiBridge
import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

@testable import ForsettiRuntime

/// The crypto service as modules use it, in-process and in a worker: module-scoped keys the
/// module never sees, results another module (or a tamperer) cannot forge.
@Suite(.onTestThreads) struct CryptoServiceTests {
  static func mode(_ isolated: Bool) -> ExecutionMode { isolated ? RuntimeHarness.isolated() : .inProcess }

  /// A module that exercises every call and leaves its sealed bytes, signature and public key
  /// in its sandbox (`own.*`); what the test puts there as `peer.*` it tries to open and verify.
  static func crypter(_ id: String, _ entry: String) -> ModuleFixture {
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.prelude = """
      static const forsetti_crypto *c;
      static void report(const char *label, long v) { char l[300]; snprintf(l, sizeof l, "%s: %ld", label, v); fixture_log(l); }
      static void hex(const char *label, const unsigned char *b, size_t n) {
        char l[300]; int o = snprintf(l, sizeof l, "%s: ", label);
        for (size_t i = 0; i < n && o < 290; i++) o += snprintf(l + o, sizeof l - o, "%02x", b[i]);
        fixture_log(l);
      }
      static long readf(const char *name, unsigned char *b, size_t cap) {
        char p[700]; snprintf(p, sizeof p, "%s/%s", g_host->sandbox_path, name);
        int fd = open(p, O_RDONLY); if (fd < 0) return -1;
        long n = read(fd, b, cap); close(fd); return n;
      }
      static void writef(const char *name, const unsigned char *b, size_t n) {
        char p[700]; snprintf(p, sizeof p, "%s/%s", g_host->sandbox_path, name);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600); if (fd < 0) return;
        if (write(fd, b, n) != (ssize_t)n) fixture_log("short write"); close(fd);
      }
      static unsigned char big[65537];
      """
    f.start = """
      c = host->resolve(FORSETTI_SERVICE_CRYPTO);
      if (!c) { fixture_log("resolve: null"); return FORSETTI_OK; }
      const char *msg = "attack at dawn";
      unsigned char pk[32], sealed[200], plain[200], sig[64], d[64], r1[32], r2[32];
      size_t sl = 0, pl = 0, need = 0;
      report("public-key", c->public_key(pk)); hex("public-key-hex", pk, 32);
      report("seal", c->seal(msg, 14, "hdr", 3, sealed, sizeof sealed, &sl)); report("seal-length", (long)sl);
      int rc = c->open(sealed, sl, "hdr", 3, plain, sizeof plain, &pl);
      { char l[300]; snprintf(l, sizeof l, "open: %d %.*s", rc, rc == 0 ? (int)pl : 0, plain); fixture_log(l); }
      report("open-other-extra", c->open(sealed, sl, "hdX", 3, plain, sizeof plain, &pl));
      sealed[30] ^= 1; report("open-tampered", c->open(sealed, sl, "hdr", 3, plain, sizeof plain, &pl)); sealed[30] ^= 1;
      report("open-short", c->open(sealed, 39, NULL, 0, plain, sizeof plain, &pl));
      report("seal-small", c->seal(msg, 14, NULL, 0, sealed + 100, 10, &need)); report("seal-need", (long)need);
      report("open-small", c->open(sealed, sl, "hdr", 3, plain, 3, &need)); report("open-need", (long)need);
      report("seal-null", c->seal(NULL, 5, NULL, 0, plain, sizeof plain, &need));
      report("seal-too-large", c->seal(big, sizeof big, NULL, 0, plain, sizeof plain, &need));
      report("hash", c->hash("abc", 3, d, 32)); hex("hash-hex", d, 32);
      report("hash-64", c->hash("abc", 3, d, 64)); hex("hash-64-hex", d, 64);
      report("hash-short", c->hash("abc", 3, d, 15)); report("hash-long", c->hash("abc", 3, d, 65));
      report("random", c->random_bytes(r1, 32)); c->random_bytes(r2, 32);
      report("random-differ", memcmp(r1, r2, 32) != 0);
      report("random-too-large", c->random_bytes(big, sizeof big)); report("random-null", c->random_bytes(NULL, 4));
      report("sign", c->sign(msg, 14, sig)); hex("signature-hex", sig, 64);
      report("verify-own", c->verify(msg, 14, sig, pk));
      report("verify-other-message", c->verify("attack at dusk", 14, sig, pk));
      report("verify-null", c->verify(msg, 14, NULL, pk));
      unsigned char peer[200], peer_sig[64], peer_pk[32];
      long n = readf("peer.sealed", peer, sizeof peer);
      if (n > 0) report("open-peer", c->open(peer, (size_t)n, "hdr", 3, plain, sizeof plain, &pl));
      if (readf("peer.sig", peer_sig, 64) == 64 && readf("peer.pk", peer_pk, 32) == 32) {
        report("verify-peer-with-peer-key", c->verify(msg, 14, peer_sig, peer_pk));
        report("verify-peer-with-own-key", c->verify(msg, 14, peer_sig, pk));
      }
      n = readf("own.sealed", peer, sizeof peer);
      if (n > 0) {
        rc = c->open(peer, (size_t)n, "hdr", 3, plain, sizeof plain, &pl);
        char l[300]; snprintf(l, sizeof l, "open-last-run: %d %.*s", rc, rc == 0 ? (int)pl : 0, plain); fixture_log(l);
      }
      writef("own.sealed", sealed, sl); writef("own.sig", sig, 64); writef("own.pk", pk, 32);
      return FORSETTI_OK;
      """
    return f
  }

  static func blake2b(_ text: String, _ size: Int) throws -> String {
    let r = try ProcessRunner.run(
      "/usr/bin/env",
      [
        "python3", "-c",
        "import hashlib,sys; print(hashlib.blake2b(sys.argv[1].encode(), digest_size=\(size)).hexdigest())",
        text,
      ])
    return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
  }

  @Test(arguments: [false, true]) func everyCallWorksAndIsBoundToItsModule(isolated: Bool) throws {
    let h = RuntimeHarness()
    try Self.crypter("com.test.alice", "alice_entry").install(in: h.dir, capabilities: ["crypto_utilities"])
    try Self.crypter("com.test.bob", "bob_entry").install(in: h.dir, capabilities: ["crypto_utilities"])
    let first = try h.start(mode: Self.mode(isolated))
    #expect(h.state("com.test.alice") == .started)
    let a = h.lines("com.test.alice")
    let error = { (s: Int32) in "\(s)" }
    for expected in [
      "public-key: 0", "seal: 0", "seal-length: 54", "open: 0 attack at dawn",
      "open-other-extra: \(error(FORSETTI_ERR_INVALID_DATA))",
      "open-tampered: \(error(FORSETTI_ERR_INVALID_DATA))",
      "open-short: \(error(FORSETTI_ERR_INVALID_DATA))",
      "seal-small: \(error(FORSETTI_ERR_BUFFER_TOO_SMALL))", "seal-need: 54",
      "open-small: \(error(FORSETTI_ERR_BUFFER_TOO_SMALL))", "open-need: 14",
      "seal-null: \(error(FORSETTI_ERR_INVALID_ARGUMENT))",
      "seal-too-large: \(error(FORSETTI_ERR_TOO_LARGE))",
      "hash: 0", "hash-64: 0", "hash-short: \(error(FORSETTI_ERR_INVALID_ARGUMENT))",
      "hash-long: \(error(FORSETTI_ERR_INVALID_ARGUMENT))", "random: 0", "random-differ: 1",
      "random-too-large: \(error(FORSETTI_ERR_TOO_LARGE))",
      "random-null: \(error(FORSETTI_ERR_INVALID_ARGUMENT))",
      "sign: 0", "verify-own: 0", "verify-other-message: \(error(FORSETTI_ERR_INVALID_DATA))",
      "verify-null: \(error(FORSETTI_ERR_INVALID_ARGUMENT))",
    ] {
      #expect(a.contains(expected), "\(expected) not in \(a)")
    }
    // The digest agrees with an implementation that is not libsodium's.
    #expect(a.contains("hash-hex: \(try Self.blake2b("abc", 32))"))
    #expect(a.contains("hash-64-hex: \(try Self.blake2b("abc", 64))"))
    // Two modules, two key pairs.
    let keyA = a.first { $0.hasPrefix("public-key-hex: ") }
    let keyB = h.lines("com.test.bob").first { $0.hasPrefix("public-key-hex: ") }
    #expect(keyA != nil && keyB != nil && keyA != keyB)
    first.stopAll()

    // Bob gets what Alice sealed and signed; then a new host on the same state directory.
    let alice = first.environment.sandboxPath(for: "com.test.alice")
    let bob = first.environment.sandboxPath(for: "com.test.bob")
    for (from, to) in [("own.sealed", "peer.sealed"), ("own.sig", "peer.sig"), ("own.pk", "peer.pk")] {
      try FileManager.default.copyItem(atPath: "\(alice)/\(from)", toPath: "\(bob)/\(to)")
    }
    let second = try h.start(mode: Self.mode(isolated))
    defer { second.stopAll() }
    let b = h.lines("com.test.bob")
    #expect(b.contains("open-peer: \(FORSETTI_ERR_INVALID_DATA)"), "\(b)")
    #expect(b.contains("verify-peer-with-peer-key: 0"), "\(b)")
    #expect(b.contains("verify-peer-with-own-key: \(FORSETTI_ERR_INVALID_DATA)"), "\(b)")
    // Keys persist: what Alice sealed before the restart still opens, her public key is the same.
    let a2 = h.lines("com.test.alice")
    #expect(a2.contains("open-last-run: 0 attack at dawn"), "\(a2)")
    #expect(a2.filter { $0.hasPrefix("public-key-hex: ") }.count == 2)
    #expect(Set(a2.filter { $0.hasPrefix("public-key-hex: ") }).count == 1)
  }

  @Test(arguments: [false, true]) func withoutTheCapabilityResolveGivesNull(isolated: Bool) throws {
    let h = RuntimeHarness()
    try Self.crypter("com.test.nocrypto", "nocrypto_entry").install(
      in: h.dir, capabilities: ["secure_storage"])
    let m = try h.start(mode: Self.mode(isolated))
    defer { m.stopAll() }
    #expect(h.lines("com.test.nocrypto").contains("resolve: null"))
    #expect(!FileManager.default.fileExists(atPath: h.dir.url("state/keys/com.test.nocrypto.key")))
  }

  /// What a hostile worker could send: calls without the grant, and lengths the C table would
  /// have refused. The host checks them all again.
  @Test func theHostRefusesWhatTheCallerWasNotGrantedAndChecksEveryLength() throws {
    let dir = TemporaryDirectory("crypto-host")
    let env = HostEnvironment(stateDirectory: dir.url("state"), log: MemoryLogSink())
    let denied = ModuleCaller(moduleID: "com.test.nogrant", granted: [.secureStorage])
    let requests: [ServiceRequest] = [
      ServiceRequest(.cryptoRandom, capacity: 8, number: 8),
      ServiceRequest(.cryptoHash, capacity: 32, number: 32, [[1]]),
      ServiceRequest(.cryptoSeal, capacity: 100, [[1], []]),
      ServiceRequest(.cryptoOpen, capacity: 100, [[UInt8](repeating: 0, count: 41), []]),
      ServiceRequest(.cryptoSign, capacity: 64, [[1]]),
      ServiceRequest(
        .cryptoVerify, [[1], [UInt8](repeating: 0, count: 64), [UInt8](repeating: 0, count: 32)]),
      ServiceRequest(.cryptoPublicKey, capacity: 32),
    ]
    for r in requests {
      #expect(env.services.answer(r, from: denied).status == FORSETTI_ERR_DENIED, "\(r.operation)")
    }
    #expect(!FileManager.default.fileExists(atPath: dir.url("state/keys/com.test.nogrant.key")))

    let caller = ModuleCaller(moduleID: "com.test.granted", granted: [.cryptoUtilities])
    func status(_ r: ServiceRequest) -> Int32 { env.services.answer(r, from: caller).status }
    let big = [UInt8](repeating: 0, count: Int(FORSETTI_CRYPTO_MAX_INPUT) + 1)
    // More than the caller can take back, or more than the limit.
    #expect(status(ServiceRequest(.cryptoRandom, capacity: 8, number: 9)) == FORSETTI_ERR_INVALID_ARGUMENT)
    #expect(status(ServiceRequest(.cryptoRandom, capacity: 8, number: -1)) == FORSETTI_ERR_INVALID_ARGUMENT)
    #expect(
      status(ServiceRequest(.cryptoHash, capacity: 16, number: 32, [[1]])) == FORSETTI_ERR_INVALID_ARGUMENT)
    #expect(
      status(ServiceRequest(.cryptoHash, capacity: 64, number: 15, [[1]])) == FORSETTI_ERR_INVALID_ARGUMENT)
    #expect(status(ServiceRequest(.cryptoHash, capacity: 32, number: 32, [big])) == FORSETTI_ERR_TOO_LARGE)
    #expect(status(ServiceRequest(.cryptoSign, capacity: 63, [[1]])) == FORSETTI_ERR_INVALID_ARGUMENT)
    #expect(status(ServiceRequest(.cryptoSign, capacity: 64, [big])) == FORSETTI_ERR_TOO_LARGE)
    #expect(status(ServiceRequest(.cryptoPublicKey, capacity: 31)) == FORSETTI_ERR_INVALID_ARGUMENT)
    #expect(
      status(ServiceRequest(.cryptoVerify, [[1], [UInt8](repeating: 0, count: 95)]))
        == FORSETTI_ERR_INVALID_ARGUMENT)
    #expect(status(ServiceRequest(.cryptoVerify, [[1]])) == FORSETTI_ERR_INVALID_ARGUMENT)
    #expect(status(ServiceRequest(.cryptoSeal, capacity: 100_000, [big, []])) == FORSETTI_ERR_TOO_LARGE)
    let half = [UInt8](repeating: 0, count: Int(FORSETTI_CRYPTO_MAX_INPUT) / 2 + 1)
    #expect(status(ServiceRequest(.cryptoSeal, capacity: 100_000, [half, half])) == FORSETTI_ERR_TOO_LARGE)
    // The reply never exceeds the capacity: the size needed comes back instead.
    let sealSmall = env.services.answer(
      ServiceRequest(.cryptoSeal, capacity: 40, [[1, 2], []]), from: caller)
    #expect(sealSmall == ServiceReply(FORSETTI_ERR_BUFFER_TOO_SMALL, length: 42))
    let sealed = env.services.answer(ServiceRequest(.cryptoSeal, capacity: 42, [[1, 2], [9]]), from: caller)
    #expect(sealed.status == FORSETTI_OK && sealed.bytes.count == 42)
    let opened = env.services.answer(
      ServiceRequest(.cryptoOpen, capacity: 2, [sealed.bytes, [9]]), from: caller)
    #expect(opened == ServiceReply(FORSETTI_OK, [1, 2]))
    let openSmall = env.services.answer(
      ServiceRequest(.cryptoOpen, capacity: 1, [sealed.bytes, [9]]), from: caller)
    #expect(openSmall == ServiceReply(FORSETTI_ERR_BUFFER_TOO_SMALL, length: 2))
    #expect(
      status(ServiceRequest(.cryptoOpen, capacity: 100, [[1, 2, 3], []])) == FORSETTI_ERR_INVALID_DATA)
  }
}
