import CForsetti
import ForsettiBridge
import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

@testable import ForsettiRuntime

/// Secure storage as modules use it, in-process and in a worker: values sealed at rest beneath
/// the state directory, keys outside every sandbox, a value bound to its module and key.
@Suite(.onTestThreads) struct SecureStorageTests {
  static let secret = "hunter2-PLAIN-TEXT-MARKER"

  static func mode(_ isolated: Bool) -> ExecutionMode { isolated ? RuntimeHarness.isolated() : .inProcess }

  /// A module that, on its first run, stores values and probes the service's edges; on a later
  /// run (its value "two" exists) reads what is there, which the test may have altered.
  static func vault(_ id: String, _ entry: String, state: String) -> ModuleFixture {
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.prelude = """
      #include <errno.h>
      static const forsetti_secure_storage *ss;
      static void report(const char *label, long v) { char l[300]; snprintf(l, sizeof l, "%s: %ld", label, v); fixture_log(l); }
      static void try_open(const char *label, const char *path) {
        int fd = open(path, O_RDONLY);
        char l[700]; snprintf(l, sizeof l, "%s: %s", label, fd >= 0 ? "opened" : strerror(errno)); fixture_log(l);
        if (fd >= 0) close(fd);
      }
      static void read_back(const char *label, const char *key) {
        char buf[256]; size_t n = 0;
        int rc = ss->get(key, buf, sizeof buf - 1, &n);
        char l[400]; snprintf(l, sizeof l, "%s: %d %.*s", label, rc, rc == 0 ? (int)n : 0, buf); fixture_log(l);
      }
      static char big[65537];
      """
    f.start = """
      ss = host->resolve(FORSETTI_SERVICE_SECURE_STORAGE);
      if (!ss) { fixture_log("resolve: null"); return FORSETTI_OK; }
      char buf[256]; size_t n = 0;
      if (ss->get("two", buf, sizeof buf, &n) != FORSETTI_ERR_NOT_FOUND) {
        read_back("again-two", "two"); read_back("again-one", "one");
        read_back("again-moved", "moved"); read_back("again-stolen", "stolen");
        return FORSETTI_OK;
      }
      report("set", ss->set("kept", "\(secret)", strlen("\(secret)")));
      read_back("get", "kept");
      n = 0; report("small", ss->get("kept", buf, 4, &n)); report("small-length", (long)n);
      report("missing", ss->get("nothing", buf, sizeof buf, &n));
      report("set-temp", ss->set("temp", "x", 1));
      report("remove", ss->remove("temp")); report("remove-again", ss->remove("temp"));
      report("bad-key", ss->set("../escape", "x", 1)); report("dot-key", ss->set(".hidden", "x", 1));
      report("null-value", ss->set("k", NULL, 5)); report("null-length", ss->get("kept", buf, 4, NULL));
      report("too-large", ss->set("big", big, sizeof big));
      report("max-size", ss->set("max", big, sizeof big - 1));
      report("set-one", ss->set("one", "first value", 11)); report("set-two", ss->set("two", "second value", 12));
      char p[700];
      snprintf(p, sizeof p, "\(state)/keys/%s.key", host->module_id); try_open("key-file", p);
      snprintf(p, sizeof p, "\(state)/secure/%s/kept", host->module_id); try_open("sealed-file", p);
      return FORSETTI_OK;
      """
    return f
  }

  @Test(arguments: [false, true]) func aSecretIsSealedAtRestAndReadBack(isolated: Bool) throws {
    let h = RuntimeHarness()
    let state = h.dir.url("state")
    try Self.vault("com.test.vault", "vault_entry", state: state).install(
      in: h.dir, capabilities: ["secure_storage"])
    let m = try h.start(mode: Self.mode(isolated))
    defer { m.stopAll() }
    #expect(h.state("com.test.vault") == .started)
    let lines = h.lines("com.test.vault")
    for expected in [
      "set: 0", "get: 0 \(Self.secret)", "small: \(FORSETTI_ERR_BUFFER_TOO_SMALL)",
      "small-length: \(Self.secret.utf8.count)", "missing: \(FORSETTI_ERR_NOT_FOUND)", "set-temp: 0",
      "remove: 0",
      "remove-again: \(FORSETTI_ERR_NOT_FOUND)", "bad-key: \(FORSETTI_ERR_INVALID_ARGUMENT)",
      "dot-key: \(FORSETTI_ERR_INVALID_ARGUMENT)", "null-value: \(FORSETTI_ERR_INVALID_ARGUMENT)",
      "null-length: \(FORSETTI_ERR_INVALID_ARGUMENT)", "too-large: \(FORSETTI_ERR_TOO_LARGE)", "max-size: 0",
    ] {
      #expect(lines.contains(expected), "\(expected) not in \(lines)")
    }
    // On disk: sealed, not plain, 0600 in 0700 directories outside the sandbox.
    let sealedPath = "\(state)/secure/com.test.vault/kept"
    let sealed = try #require(FileManager.default.contents(atPath: sealedPath))
    #expect(sealed.count == 4 + 24 + Self.secret.utf8.count + 16)
    #expect(sealed.range(of: Data(Self.secret.utf8)) == nil)
    #expect(sealed.range(of: Data("hunter2".utf8)) == nil)
    let keyPath = "\(state)/keys/com.test.vault.key"
    #expect(try Self.mode(of: keyPath) == 0o600)
    #expect(try Self.mode(of: "\(state)/keys") == 0o700)
    #expect(try Self.mode(of: sealedPath) == 0o600)
    #expect(try Self.mode(of: "\(state)/secure/com.test.vault") == 0o700)
    #expect(!keyPath.hasPrefix(m.environment.sandboxPath(for: "com.test.vault")))
    // Nothing anywhere under the state directory (logs included) holds the secret in plain text.
    for file in try FileManager.default.subpathsOfDirectory(atPath: state) {
      guard let data = FileManager.default.contents(atPath: "\(state)/\(file)") else { continue }
      #expect(data.range(of: Data(Self.secret.utf8)) == nil, "\(file) holds the secret")
    }
    #expect(!h.log.all.contains { $0.message.contains(Self.secret) && $0.moduleID == nil })
    if isolated {
      // The worker is confined to its sandbox: the host's key and sealed files are out of reach.
      #expect(lines.contains("key-file: Permission denied"), "\(lines)")
      #expect(lines.contains("sealed-file: Permission denied"), "\(lines)")
    }
  }

  @Test(arguments: [false, true]) func anAlteredOrMovedValueDoesNotOpenAndKeysSurviveARestart(isolated: Bool)
    throws
  {
    let h = RuntimeHarness()
    let state = h.dir.url("state")
    try Self.vault("com.test.alpha", "alpha_entry", state: state).install(
      in: h.dir, capabilities: ["secure_storage"])
    try Self.vault("com.test.beta", "beta_entry", state: state).install(
      in: h.dir, capabilities: ["secure_storage"])
    let first = try h.start(mode: Self.mode(isolated))
    #expect(h.lines("com.test.alpha").contains("set-two: 0"))
    #expect(h.lines("com.test.beta").contains("set-two: 0"))
    first.stopAll()

    let alpha = "\(state)/secure/com.test.alpha"
    var one = try #require(FileManager.default.contents(atPath: "\(alpha)/one"))
    one[one.count - 1] ^= 0x01
    try one.write(to: URL(fileURLWithPath: "\(alpha)/one"))
    try FileManager.default.copyItem(atPath: "\(alpha)/two", toPath: "\(alpha)/moved")
    try FileManager.default.copyItem(atPath: "\(alpha)/two", toPath: "\(state)/secure/com.test.beta/stolen")

    // A new host on the same state directory: the same keys, so old values still open.
    let second = try h.start(mode: Self.mode(isolated))
    defer { second.stopAll() }
    let a = h.lines("com.test.alpha")
    let b = h.lines("com.test.beta")
    #expect(a.contains("again-two: 0 second value"), "\(a)")
    #expect(a.contains("again-one: \(FORSETTI_ERR_INVALID_DATA) "), "\(a)")
    #expect(a.contains("again-moved: \(FORSETTI_ERR_INVALID_DATA) "), "\(a)")
    #expect(b.contains("again-stolen: \(FORSETTI_ERR_INVALID_DATA) "), "\(b)")
    #expect(b.contains("again-two: 0 second value"), "\(b)")
  }

  @Test(arguments: [false, true]) func withoutTheCapabilityResolveGivesNull(isolated: Bool) throws {
    let h = RuntimeHarness()
    try Self.vault("com.test.nocap", "nocap_entry", state: h.dir.url("state")).install(in: h.dir)
    let m = try h.start(mode: Self.mode(isolated))
    defer { m.stopAll() }
    #expect(h.lines("com.test.nocap").contains("resolve: null"))
    #expect(!FileManager.default.fileExists(atPath: h.dir.url("state/secure/com.test.nocap")))
  }

  /// What a hostile worker could send: a request for a capability it lacks, or values the C
  /// table would have refused. The host answers from its own grant and checks again.
  @Test func theHostRefusesWhatTheCallerWasNotGrantedAndChecksEveryValue() throws {
    let dir = TemporaryDirectory("secure-host")
    let log = MemoryLogSink()
    let env = HostEnvironment(stateDirectory: dir.url("state"), log: log)
    let set = ServiceRequest(.secureSet, [Array("k".utf8), Array("v".utf8)])
    let denied = ModuleCaller(moduleID: "com.test.nogrant", granted: [])
    #expect(env.services.answer(set, from: denied).status == FORSETTI_ERR_DENIED)
    #expect(
      env.services.answer(ServiceRequest(.secureGet, capacity: 10, [Array("k".utf8)]), from: denied).status
        == FORSETTI_ERR_DENIED)
    #expect(!FileManager.default.fileExists(atPath: dir.url("state/keys/com.test.nogrant.key")))
    #expect(log.all.contains { $0.message.contains("capability secure_storage was not granted") })

    let caller = ModuleCaller(moduleID: "com.test.granted", granted: [.secureStorage])
    #expect(env.services.answer(set, from: caller).status == FORSETTI_OK)
    let get = env.services.answer(ServiceRequest(.secureGet, capacity: 10, [Array("k".utf8)]), from: caller)
    #expect(get == ServiceReply(FORSETTI_OK, Array("v".utf8)))
    // Capacity is what the caller can take back: a smaller one gets the size needed, no bytes.
    let small = env.services.answer(ServiceRequest(.secureGet, capacity: 0, [Array("k".utf8)]), from: caller)
    #expect(small == ServiceReply(FORSETTI_ERR_BUFFER_TOO_SMALL, length: 1))
    for key in ["../k", "a/b", ".k", "", String(repeating: "k", count: 129)] {
      let r = env.services.answer(ServiceRequest(.secureSet, [Array(key.utf8), [1]]), from: caller)
      #expect(r.status == FORSETTI_ERR_INVALID_ARGUMENT, "key \(key)")
    }
    let tooLarge = ServiceRequest(
      .secureSet, [Array("k".utf8), [UInt8](repeating: 0, count: Int(FORSETTI_SECURE_STORAGE_MAX_VALUE) + 1)])
    #expect(env.services.answer(tooLarge, from: caller).status == FORSETTI_ERR_TOO_LARGE)
    #expect(
      env.services.answer(ServiceRequest(.secureSet, [Array("k".utf8)]), from: caller).status
        == FORSETTI_ERR_INVALID_ARGUMENT)
  }

  /// A damaged key file is reported and kept: replacing it would lose every sealed value.
  @Test func aCorruptKeyFileIsAnErrorAndIsNeverReplaced() throws {
    let dir = TemporaryDirectory("secure-badkey")
    let log = MemoryLogSink()
    let garbage = try dir.write("state/keys/com.test.broken.key", "not a key")
    let env = HostEnvironment(stateDirectory: dir.url("state"), log: log)
    let caller = ModuleCaller(moduleID: "com.test.broken", granted: [.secureStorage, .cryptoUtilities])
    let set = ServiceRequest(.secureSet, [Array("k".utf8), Array("v".utf8)])
    #expect(env.services.answer(set, from: caller).status == FORSETTI_ERR_IO)
    #expect(env.services.answer(set, from: caller).status == FORSETTI_ERR_IO)
    #expect(
      env.services.answer(ServiceRequest(.cryptoPublicKey, capacity: 32), from: caller).status
        == FORSETTI_ERR_IO)
    #expect(try String(contentsOfFile: garbage, encoding: .utf8) == "not a key")
    let reports = log.all.filter {
      $0.moduleID == "com.test.broken" && $0.message.contains("module keys unavailable")
    }
    // Reported once, not once per call.
    #expect(reports.count == 1, "\(reports.map(\.message))")
    #expect(reports.first?.message.contains("is not a module key") == true)
  }

  /// Secure storage and the crypto service use different keys derived from one secret.
  @Test func theDerivedKeysDiffer() throws {
    let dir = TemporaryDirectory("secure-derive")
    let keys = ModuleKeys(stateDirectory: dir.url("state"))
    let a = try keys.keys(for: "com.test.one")
    let b = try keys.keys(for: "com.test.two")
    #expect(a.sealKey != a.storageKey)
    #expect(a.sealKey != b.sealKey)
    #expect(a.signPublic != b.signPublic)
    // A second holder of the same directory (a restarted host) derives the same keys.
    let again = try ModuleKeys(stateDirectory: dir.url("state")).keys(for: "com.test.one")
    #expect(
      again.sealKey == a.sealKey && again.storageKey == a.storageKey && again.signPublic == a.signPublic)
  }

  static func mode(of path: String) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: path)
    return ((attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1) & 0o777
  }
}
