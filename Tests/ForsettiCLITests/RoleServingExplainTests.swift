import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

/// What an operator sees of a module serving modules (issue 39): `explain` on a running host
/// says which role it serves, how many calls it runs at once, and how many run and wait now;
/// `--json` carries the same under `serving`, and `/metrics` the same as series (calls queued
/// and in flight, and the queue waits the provider's worker counted). A real host, a provider
/// declaring concurrency 2, a consumer of five threads keeping it busy.
@Suite(.onTestThreads, .serialized) struct RoleServingExplainTests: LiveHostSuite {
  let dir = TemporaryDirectory("role-serving-explain")

  static func provider() -> ModuleFixture {
    var f = ModuleFixture(moduleID: "com.test.pair", entryPoint: "pair_entry")
    f.prelude = """
      #include <time.h>
      static forsetti_status handle(void *ctx, const char *caller, const char *method, const void *req,
                                    size_t len, void *resp, size_t cap, size_t *rlen) {
        (void)ctx; (void)caller; (void)method; (void)req; (void)len; (void)resp; (void)cap;
        struct timespec t = { 1, 500000000L };
        nanosleep(&t, NULL);
        *rlen = 0;
        return FORSETTI_OK;
      }
      """
    f.start = """
      const forsetti_role_service *r = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      if (!r) return FORSETTI_ERR_START_FAILED;
      return r->serve_concurrently(handle, NULL, 2) == FORSETTI_OK ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    return f
  }

  static func consumer() -> ModuleFixture {
    var f = ModuleFixture(moduleID: "com.test.busy", entryPoint: "busy_entry")
    f.prelude = """
      #include <pthread.h>
      static const forsetti_role_service *g_db;
      static volatile int g_run = 1;
      static pthread_t g_threads[5];
      static void *loop(void *a) {
        (void)a; char out[8]; size_t n;
        while (g_run) g_db->call("slow", "", 0, out, sizeof out, &n);
        return NULL;
      }
      """
    f.start = """
      g_db = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      if (!g_db) return FORSETTI_ERR_START_FAILED;
      for (int i = 0; i < 5; i++) pthread_create(&g_threads[i], NULL, loop, NULL);
      return FORSETTI_OK;
      """
    f.stop = "g_run = 0; for (int i = 0; i < 5; i++) pthread_join(g_threads[i], NULL);"
    return f
  }

  @Test(.timeLimit(.minutes(5)))
  func explainShowsTheRoleItsConcurrencyAndItsQueue() throws {
    try Self.provider().install(
      in: dir, capabilities: ["shared_database"], manifestExtra: #","defaultModuleRole":"shared_database""#)
    try Self.consumer().install(
      in: dir, capabilities: ["shared_database"], manifestExtra: RoleLoadFixtures.consumesSharedDatabase)
    let host = try launch(["--approve-all", "--metrics", "127.0.0.1:0"])
    defer { host.stop() }
    let w = published(["com.test.pair": "started", "com.test.busy": "started"], by: host)
    try #require(w.reached, why(w, host))
    try #require(answering(host))

    // Five callers, two handlers: once the consumer's calls are under way, two run and three wait.
    var serving: JSONObject?
    for _ in 0..<600 where host.process.isRunning {
      let r = try cli(["explain", "com.test.pair", "--state", state, "--manifests", manifests, "--json"])
      serving = try JSONParser.parse(r.stdout).objectValue?["serving"]?.objectValue
      if serving?["inFlight"]?.integerValue == 2, serving?["queued"]?.integerValue == 3 { break }
      usleep(100_000)
    }
    #expect(serving?["role"] == "shared_database", "\(String(describing: serving))")
    #expect(serving?["where"] == "worker")
    #expect(serving?["concurrency"]?.integerValue == 2)
    #expect(serving?["inFlight"]?.integerValue == 2, "\(String(describing: serving))")
    #expect(serving?["queued"]?.integerValue == 3, "\(String(describing: serving))")

    let text = try cli(["explain", "com.test.pair", "--state", state, "--manifests", manifests]).stdout
    #expect(text.contains("serves shared_database (worker): 2 call(s) at once; now "), "\(text)")
    // The consumer serves nothing: no such line, and null in JSON.
    let other = try cli(["explain", "com.test.busy", "--state", state, "--manifests", manifests, "--json"])
    #expect(try JSONParser.parse(other.stdout).objectValue?["serving"] == .null, "\(other.stdout)")

    // The same load on /metrics: two in flight, three queued, and queue waits counted (the
    // consumer's calls wait 1.5 s each behind the others, so some fall in buckets above 1 s).
    let line = try #require(host.lines.first { $0.contains("metrics: http://127.0.0.1:") }, "\(host.lines)")
    let port = try #require(
      line.range(of: "http://127.0.0.1:").flatMap { UInt16(line[$0.upperBound...].prefix { $0.isNumber }) })
    let pair = "{module=\"com.test.pair\"}"
    let page = try MetricsTests.page(port) { page in
      MetricsTests.value(page, "forsetti_module_role_calls_in_flight" + pair) == 2
        && MetricsTests.value(page, "forsetti_module_role_calls_queued" + pair) == 3
        && (MetricsTests.value(page, "forsetti_module_role_queue_wait_seconds_count" + pair) ?? 0) > 0
    }
    #expect(MetricsTests.value(page, "forsetti_module_role_calls_in_flight" + pair) == 2, "\(page)")
    #expect(MetricsTests.value(page, "forsetti_module_role_calls_queued" + pair) == 3, "\(page)")
    #expect((MetricsTests.value(page, "forsetti_module_role_queue_wait_seconds_count" + pair) ?? 0) > 0)
    #expect(
      MetricsTests.value(page, "forsetti_module_role_busy_total" + pair) == 0, "five callers, seven lanes")
  }
}
