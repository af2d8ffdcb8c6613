import ForsettiTestSupport
import Foundation
import Testing

/// The ABI 1.1 services through a real `forsetti-host run`, as root and as an unprivileged user:
/// a consumer calls its provider between two workers (on a channel the host opened), keeps
/// a secret, seals and signs; a module without the capabilities gets nothing.
@Suite(.onTestThreads) struct ServicesAsUsersTests {
  static let consumes =
    #","manifestTemplateVersion":"1.1","runtimeRequirements":{"io":[],"dataIsolation":{"mode":"framework_mediated_shared"}}"#

  static var provider: ModuleFixture {
    var f = ModuleFixture(moduleID: "com.test.db", entryPoint: "db_entry")
    f.prelude = """
      static forsetti_status handle(void *ctx, const char *caller, const char *method, const void *req,
                                    size_t len, void *resp, size_t cap, size_t *rlen) {
        (void)ctx;
        int n = snprintf(resp, cap, "%s|%s|%.*s", caller, method, (int)len, (const char *)req);
        if (n < 0 || (size_t)n >= cap) return FORSETTI_ERR_BUFFER_TOO_SMALL;
        *rlen = (size_t)n;
        return FORSETTI_OK;
      }
      """
    f.start = """
      const forsetti_role_service *r = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      return r && r->serve(handle, NULL) == FORSETTI_OK ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    return f
  }

  /// Calls the provider three times from a thread of its own (on the channel the host opens
  /// at the first), keeps and reads back a secret, seals, opens, signs and verifies.
  static func consumer(id: String, entry: String) -> ModuleFixture {
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.prelude = """
      #include <pthread.h>
      static pthread_t g_thread;
      static const forsetti_role_service *g_db;
      static void say(const char *what, forsetti_status s) {
        char line[160]; snprintf(line, sizeof line, "%s -> %d", what, s); fixture_log(line);
      }
      static void *calls(void *arg) {
        (void)arg;
        for (int i = 0; i < 3; i++) {
          char out[128]; size_t n = 0;
          forsetti_status s = g_db->call("echo", "hi", 2, out, sizeof out - 1, &n);
          out[s == FORSETTI_OK ? n : 0] = 0;
          char line[200]; snprintf(line, sizeof line, "call %d -> %d %s", i, s, out); fixture_log(line);
          usleep(100000);
        }
        return NULL;
      }
      """
    f.start = """
      const forsetti_secure_storage *sec = host->resolve(FORSETTI_SERVICE_SECURE_STORAGE);
      const forsetti_crypto *cr = host->resolve(FORSETTI_SERVICE_CRYPTO);
      g_db = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      if (!sec || !cr || !g_db) { fixture_log("services missing"); return FORSETTI_OK; }
      char got[64] = {0}; size_t n = 0;
      say("secure set", sec->set("token", "s3cr3t-value", 12));
      forsetti_status s = sec->get("token", got, sizeof got - 1, &n);
      say(s == FORSETTI_OK && n == 12 && memcmp(got, "s3cr3t-value", 12) == 0 ? "secure get same" : "secure get differs", s);
      unsigned char sealed[64], opened[64], sig[64], pk[32]; size_t sl = 0, ol = 0;
      say("seal", cr->seal("plain", 5, NULL, 0, sealed, sizeof sealed, &sl));
      s = cr->open(sealed, sl, NULL, 0, opened, sizeof opened, &ol);
      say(s == FORSETTI_OK && ol == 5 && memcmp(opened, "plain", 5) == 0 ? "open same" : "open differs", s);
      say("sign", cr->sign("msg", 3, sig));
      say("public key", cr->public_key(pk));
      say("verify", cr->verify("msg", 3, sig, pk));
      sig[0] ^= 1;
      say("verify altered", cr->verify("msg", 3, sig, pk));
      return pthread_create(&g_thread, NULL, calls, NULL) == 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    f.stop = "if (g_db) pthread_join(g_thread, NULL);"
    return f
  }

  @Test(arguments: HostileHost.Identity.allCases)
  func rolesSecretsAndCryptoWorkBetweenWorkers(as identity: HostileHost.Identity) throws {
    let host = HostileHost(identity)
    try #require(host.isAvailable, "running as another user needs root")
    try Self.provider.install(
      in: host.dir, capabilities: ["shared_database"],
      manifestExtra: #","defaultModuleRole":"shared_database""#,
      ccFlags: ["-D_GNU_SOURCE"])
    try Self.consumer(id: "com.test.app", entry: "app_entry").install(
      in: host.dir, capabilities: ["shared_database", "secure_storage", "crypto_utilities"],
      manifestExtra: Self.consumes, ccFlags: ["-D_GNU_SOURCE"])
    // Consumes the role but was granted none of the three capabilities.
    try Self.consumer(id: "com.test.bare", entry: "bare_entry").install(
      in: host.dir, manifestExtra: Self.consumes, ccFlags: ["-D_GNU_SOURCE"])
    let run = try host.run(for: 2.5)
    #expect(run.status == 0, "\(run.output)")
    let app = run.lines("com.test.app")
    for expected in [
      "secure set -> 0", "secure get same -> 0", "seal -> 0", "open same -> 0", "sign -> 0",
      "public key -> 0",
      // -12 is FORSETTI_ERR_INVALID_DATA, fixed by the ABI.
      "verify -> 0", "verify altered -> -12",
      // The provider names the caller the host bound (the channel's label), every time.
      "call 0 -> 0 com.test.app|echo|hi", "call 1 -> 0 com.test.app|echo|hi",
      "call 2 -> 0 com.test.app|echo|hi",
    ] {
      #expect(app.contains(expected), "\(expected): \(app)")
    }
    #expect(run.lines("com.test.bare").contains("services missing"), "\(run.lines("com.test.bare"))")
    // The secret is sealed on disk, in a store the host keeps outside the sandboxes.
    let store = host.dir.url("state/secure/com.test.app/token")
    let sealed = try #require(FileManager.default.contents(atPath: store), "\(store)")
    #expect(sealed.range(of: Data("s3cr3t-value".utf8)) == nil)
    // And nothing beneath the module's own sandbox holds it.
    let sandbox = host.sandbox("com.test.app")
    for case let file as String in FileManager.default.enumerator(atPath: sandbox)?.allObjects ?? [] {
      let bytes = FileManager.default.contents(atPath: sandbox + "/" + file) ?? Data()
      #expect(bytes.range(of: Data("s3cr3t-value".utf8)) == nil, "\(file)")
    }
  }
}
