import CForsetti
import ForsettiCore
import ForsettiRuntime
import ForsettiTestSupport
import Foundation
import Testing

/// Modules serving modules (forsetti/services/roles.h): a provider holding `shared_database`
/// serves, consumers call it, in-process and between two workers, through a real ModuleManager.
@Suite(.onTestThreads) struct RoleServiceTests {
  static let provider = "com.test.db"
  static let consumer = "com.test.app"
  static let consumes = Placement.consumesSharedDatabase

  typealias Mode = Placement

  /// A provider answering `caller|method|request`; `big` needs 5000 bytes, `lie` claims more
  /// than it had room for, `crash` aborts. It first tries to call its own role (refused).
  static func providerFixture(serves: Bool = true) -> ModuleFixture {
    var f = ModuleFixture(moduleID: provider, entryPoint: "db_entry")
    f.prelude = """
      static forsetti_status handle(void *ctx, const char *caller, const char *method, const void *req,
                                    size_t len, void *resp, size_t cap, size_t *rlen) {
        (void)ctx;
        /* Each new thread the handler runs on is told: between workers every call comes on the
         * consumer's channel (one thread), in-process on the caller's thread. */
        static pid_t seen[8]; static int threads;
        pid_t me = gettid();
        int known = 0;
        for (int i = 0; i < threads; i++) known |= seen[i] == me;
        if (!known && threads < 8) {
          seen[threads++] = me;
          char line[64]; snprintf(line, sizeof line, "handler thread %d", threads); fixture_log(line);
        }
        /* A marker for tests: this many calls handled, so a second thread would have been told. */
        static int handled;
        if (++handled == 50) fixture_log("handled 50 calls");
        if (strcmp(method, "crash") == 0) abort();
        if (strcmp(method, "big") == 0) {
          *rlen = 5000;
          if (cap < 5000) return FORSETTI_ERR_BUFFER_TOO_SMALL;
          memset(resp, 'x', 5000);
          return FORSETTI_OK;
        }
        if (strcmp(method, "lie") == 0) { *rlen = cap + 100; return FORSETTI_OK; }
        int n = snprintf(resp, cap, "%s|%s|%.*s", caller, method, (int)len, (const char *)req);
        if (n < 0) return FORSETTI_ERR_IO;
        *rlen = (size_t)n;
        return (size_t)n >= cap ? FORSETTI_ERR_BUFFER_TOO_SMALL : FORSETTI_OK;
      }
      """
    f.start = """
      const forsetti_role_service *r = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      if (!r) { fixture_log("provider: no role service"); return FORSETTI_ERR_START_FAILED; }
      char b[64]; size_t n = 0; char line[128];
      snprintf(line, sizeof line, "provider: self call -> %d", r->call("echo", "x", 1, b, sizeof b, &n));
      fixture_log(line);
      \(serves ? "return r->serve(handle, NULL) == FORSETTI_OK ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;" : "return FORSETTI_OK;")
      """
    return f
  }

  /// A consumer whose thread calls the role every 20 ms and logs each change of status; the
  /// call numbered `crashAt` asks the provider to crash. It forges host->module_id first.
  static func consumerFixture(id: String = consumer, entry: String = "app_entry", crashAt: Int = -1)
    -> ModuleFixture
  {
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.prelude = """
      #include <pthread.h>
      static const forsetti_role_service *g_db;
      static volatile int g_run;
      static pthread_t g_thread;
      static void report(const char *method, forsetti_status s, const char *out, size_t n) {
        char line[512];
        snprintf(line, sizeof line, "call %s -> %d %.*s", method, s, s == FORSETTI_OK ? (int)n : 0, out);
        fixture_log(line);
      }
      static void *loop(void *arg) {
        (void)arg;
        char out[256]; size_t n = 0;
        forsetti_status s = g_db->call("big", "", 0, out, sizeof out, &n);
        char line[128]; snprintf(line, sizeof line, "big -> %d needs %zu", s, n); fixture_log(line);
        report("lie", g_db->call("lie", "", 0, out, sizeof out, &n), out, n);
        int last = 999;
        for (int i = 0; g_run && i < 2000; i++) {
          const char *method = i == \(crashAt) ? "crash" : "echo";
          s = g_db->call(method, "hi", 2, out, sizeof out, &n);
          if (s != last || i == \(crashAt)) { report(method, s, out, n); last = s; }
          usleep(20000);
        }
        return NULL;
      }
      """
    f.start = """
      ((forsetti_host *)host)->module_id = "\(provider)";
      g_db = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      if (!g_db) { fixture_log("consumer: no role service"); return FORSETTI_OK; }
      char line[64];
      snprintf(line, sizeof line, "consumer: serve -> %d", g_db->serve(NULL, NULL));
      fixture_log(line);
      g_run = 1;
      return pthread_create(&g_thread, NULL, loop, NULL) == 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    f.stop = "if (g_db) { g_run = 0; pthread_join(g_thread, NULL); }"
    return f
  }

  static func installProvider(_ h: RuntimeHarness, serves: Bool = true) throws {
    try providerFixture(serves: serves).install(
      in: h.dir, capabilities: ["shared_database"], manifestExtra: #","defaultModuleRole":"shared_database""#)
  }

  @Test(arguments: Mode.allCases)
  func aConsumerCallsItsProviderWhichSeesTheCallerTheHostBound(_ mode: Mode) throws {
    let h = RuntimeHarness()
    try Self.installProvider(h)
    try Self.consumerFixture().install(
      in: h.dir, capabilities: ["shared_database"], manifestExtra: Self.consumes)
    let m = try h.start(mode: mode.execution)
    defer { m.stopAll() }
    #expect(
      m.records.allSatisfy { $0.state == .started },
      "\(m.records.map { ($0.moduleID, $0.trace.firstFailure) })")
    // The consumer wrote the provider's ID into its host table: the host does not read it.
    let echoed = h.waitForLine(Self.consumer) { $0.hasPrefix("call echo") }
    #expect(echoed == "call echo -> 0 com.test.app|echo|hi", "\(h.lines(Self.consumer))")
    #expect(h.lines(Self.provider).contains("provider: self call -> \(FORSETTI_ERR_DENIED)"))
    #expect(h.lines(Self.consumer).contains("consumer: serve -> \(FORSETTI_ERR_DENIED)"))
    // Too small a buffer: told the size needed; a provider claiming more than it had room for
    // is not believed.
    #expect(h.lines(Self.consumer).contains("big -> \(FORSETTI_ERR_BUFFER_TOO_SMALL) needs 5000"))
    #expect(h.lines(Self.consumer).contains("call lie -> \(FORSETTI_ERR_IO) "))
    // Between workers, every call goes on a channel of the consumer's own (one thread of the
    // provider's, which the host opened without calling the provider itself); in-process, the
    // caller's thread. Either way one thread.
    let threads = ["handler thread 1"]
    // Not a quiet window but a marker: the provider has handled 50 calls (the consumer's
    // thread calls every 20 ms), each of which would have told of a new thread.
    #expect(
      h.waitForLine(Self.provider) { $0 == "handled 50 calls" } != nil, "\(h.lines(Self.provider))")
    #expect(
      h.lines(Self.provider).filter { $0.hasPrefix("handler thread") } == threads, "\(h.lines(Self.provider))"
    )
  }

  @Test func aProviderCrashFailsCallsWithTheNamedErrorAndTheyRecoverWhenItRestarts() throws {
    let h = RuntimeHarness()
    try Self.installProvider(h)
    try Self.consumerFixture(crashAt: 10).install(
      in: h.dir, capabilities: ["shared_database"], manifestExtra: Self.consumes)
    let m = try h.start(mode: Mode.isolated.execution)
    defer { m.stopAll() }
    let crashed = h.waitForLine(Self.consumer, timeout: 60) { $0.hasPrefix("call crash") }
    // Cut off by the crash: the named error, at once, not a hang and not the timeout.
    #expect(crashed == "call crash -> \(FORSETTI_ERR_UNAVAILABLE) ", "\(h.lines(Self.consumer))")
    let recovered = h.supervise(timeout: 60) {
      let lines = h.lines(Self.consumer)
      guard let at = lines.firstIndex(where: { $0.hasPrefix("call crash") }) else { return false }
      return lines[(at + 1)...].contains("call echo -> 0 com.test.app|echo|hi")
    }
    #expect(recovered, "\(h.lines(Self.consumer)) / \(h.lines(Self.provider)) / \(h.lines(nil).suffix(10))")
    #expect(h.state(Self.provider) == .started)
    // The provider restarted after its consumer, but still stops after it.
    m.stopAll()
    let host = h.lines(nil)
    let consumerStopped = try #require(host.firstIndex(of: "stopped \(Self.consumer)"), "\(host)")
    let providerStopped = try #require(host.firstIndex(of: "stopped \(Self.provider)"), "\(host)")
    #expect(consumerStopped < providerStopped, "\(host)")
  }

  @Test(arguments: Mode.allCases)
  func aProviderWithoutAHandlerIsUnavailable(_ mode: Mode) throws {
    let h = RuntimeHarness()
    try Self.installProvider(h, serves: false)
    try Self.consumerFixture().install(
      in: h.dir, capabilities: ["shared_database"], manifestExtra: Self.consumes)
    let m = try h.start(mode: mode.execution)
    defer { m.stopAll() }
    let line = h.waitForLine(Self.consumer) { $0.hasPrefix("call echo") }
    #expect(line == "call echo -> \(FORSETTI_ERR_UNAVAILABLE) ", "\(h.lines(Self.consumer))")
  }

  @Test(arguments: Mode.allCases)
  func withoutTheCapabilityOrTheRoleTheServiceIsNotThere(_ mode: Mode) throws {
    let h = RuntimeHarness()
    try Self.installProvider(h)
    // Consumes the role but was not granted its capability.
    try Self.consumerFixture(id: "com.test.nocap", entry: "nocap_entry").install(
      in: h.dir, manifestExtra: Self.consumes)
    // Granted the capability but consumes nothing.
    try Self.consumerFixture(id: "com.test.norole", entry: "norole_entry").install(
      in: h.dir, capabilities: ["shared_database"])
    let m = try h.start(mode: mode.execution)
    defer { m.stopAll() }
    for id in ["com.test.nocap", "com.test.norole"] {
      #expect(h.waitForLine(id) { $0 == "consumer: no role service" } != nil, "\(id): \(h.lines(id))")
    }
    #expect(
      h.lines("com.test.nocap").contains {
        $0.contains("forsetti.role.shared_database needs capability shared_database, which was not granted")
      }, "\(h.lines("com.test.nocap"))")
    #expect(
      h.lines("com.test.norole").contains { $0.contains("nor consumes it") }, "\(h.lines("com.test.norole"))")
  }

  /// A provider that serves, withdraws and tries to serve again, each step when the test creates
  /// the file of that name in its sandbox (`serve`, `withdraw`, `again`), as `steps` lists them:
  /// the test orders the steps by what it has seen, not by sleeps a loaded machine stretches.
  /// Its handler answers its own name.
  static func switchingProvider(_ name: String, steps: [String]) -> ModuleFixture {
    var f = ModuleFixture(moduleID: "com.test.\(name)", entryPoint: "\(name)_entry")
    let plan = steps.map { step in
      switch step {
      case "withdraw":
        return #"if (!cue("withdraw")) return NULL; g_r->serve(NULL, NULL); fixture_log("withdrew");"#
      case "again":
        return
          #"if (!cue("again")) return NULL; snprintf(line, sizeof line, "serve again -> %d", g_r->serve(handle, NULL)); fixture_log(line);"#
      default:
        return
          #"if (!cue("serve")) return NULL; snprintf(line, sizeof line, "serve -> %d", g_r->serve(handle, NULL)); fixture_log(line);"#
      }
    }.joined(separator: "\n        ")
    f.prelude = """
      #include <pthread.h>
      static const forsetti_role_service *g_r;
      static const char *g_sandbox;
      static volatile int g_stop;
      static pthread_t g_t;
      static forsetti_status handle(void *ctx, const char *caller, const char *method, const void *req,
                                    size_t len, void *resp, size_t cap, size_t *rlen) {
        (void)ctx; (void)caller; (void)method; (void)req; (void)len;
        if (cap < 8) return FORSETTI_ERR_BUFFER_TOO_SMALL;
        memcpy(resp, "\(name)", strlen("\(name)")); *rlen = strlen("\(name)");
        return FORSETTI_OK;
      }
      /* Waits (up to 120 s, or until stopped) for the test to create SANDBOX/step. */
      static int cue(const char *step) {
        char p[700]; snprintf(p, sizeof p, "%s/%s", g_sandbox, step);
        for (int i = 0; i < 12000 && !g_stop; i++) { if (access(p, F_OK) == 0) return 1; usleep(10000); }
        return 0;
      }
      static void *plan(void *arg) {
        (void)arg; char line[64]; (void)line;
        \(plan)
        return NULL;
      }
      """
    f.start = """
      g_r = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      g_sandbox = strdup(host->sandbox_path);
      return g_r && pthread_create(&g_t, NULL, plan, NULL) == 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    f.stop = "g_stop = 1; pthread_join(g_t, NULL);"
    return f
  }

  /// Two modules hold the role. p1 serves, its consumer gets a channel to it, p1 withdraws, p2
  /// takes over, p1 tries to serve again and is refused: from then on p2 answers every call —
  /// p1's channel went with its withdrawal, and its refused handler answers nothing.
  @Test(arguments: Mode.allCases)
  func aWithdrawnOrRefusedProviderAnswersNoMore(_ mode: Mode) throws {
    let h = RuntimeHarness()
    for f in [
      Self.switchingProvider("p1", steps: ["serve", "withdraw", "again"]),
      Self.switchingProvider("p2", steps: ["serve"]),
    ] {
      try f.install(
        in: h.dir, capabilities: ["shared_database"],
        manifestExtra: #","defaultModuleRole":"shared_database""#)
    }
    var c = ModuleFixture(moduleID: Self.consumer, entryPoint: "app_entry")
    c.prelude = """
      #include <pthread.h>
      static const forsetti_role_service *g_db;
      static volatile int g_run;
      static pthread_t g_thread;
      static void *loop(void *arg) {
        (void)arg; char last[16] = "", out[16], line[64]; int calls = 0;
        while (g_run) {
          size_t n = 0;
          forsetti_status s = g_db->call("who", "", 0, out, sizeof out - 1, &n);
          if (s == FORSETTI_OK) out[n] = 0; else snprintf(out, sizeof out, "%d", s);
          if (strcmp(out, last) != 0) { snprintf(line, sizeof line, "answered by %s", out); fixture_log(line); strcpy(last, out); }
          /* A marker every 25 calls: how far the consumer got, for the test to wait on. */
          if (++calls % 25 == 0) fixture_log("25 more calls");
          usleep(20000);
        }
        return NULL;
      }
      """
    c.start = """
      g_db = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      g_run = 1;
      return g_db && pthread_create(&g_thread, NULL, loop, NULL) == 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    c.stop = "g_run = 0; pthread_join(g_thread, NULL);"
    try c.install(in: h.dir, capabilities: ["shared_database"], manifestExtra: Self.consumes)
    let m = try h.start(mode: mode.execution)
    defer { m.stopAll() }
    let cue = { (id: String, step: String) in
      FileManager.default.createFile(
        atPath: h.dir.url("state/sandboxes/com.test.\(id)/\(step)"), contents: nil)
    }
    // Each step once the one before it is seen: p1 serves and answers, withdraws, p2 serves
    // and answers, then p1 asks again.
    #expect(cue("p1", "serve"))
    #expect(h.waitForLine(Self.consumer) { $0 == "answered by p1" } != nil, "\(h.lines(Self.consumer))")
    #expect(cue("p1", "withdraw"))
    #expect(h.waitForLine("com.test.p1") { $0 == "withdrew" } != nil, "\(h.lines("com.test.p1"))")
    #expect(cue("p2", "serve"))
    #expect(
      h.waitForLine("com.test.p2") { $0.hasPrefix("serve -> ") } == "serve -> 0", "\(h.lines("com.test.p2"))")
    #expect(h.waitForLine(Self.consumer) { $0 == "answered by p2" } != nil, "\(h.lines(Self.consumer))")
    #expect(cue("p1", "again"))
    #expect(h.waitForLine("com.test.p1") { $0.hasPrefix("serve again -> ") } != nil)
    // Not a quiet window: wait until the consumer has made 25 whole calls after p1's second
    // serve (two markers later), each answered by whoever holds the role then.
    let markers = { h.lines(Self.consumer).filter { $0 == "25 more calls" }.count }
    let before = markers()
    #expect(
      h.waitForLine(Self.consumer) { _ in markers() >= before + 2 } != nil, "\(h.lines(Self.consumer))")
    let lines = h.lines(Self.consumer).filter { $0.hasPrefix("answered by") }
    #expect(lines.contains("answered by p1"), "\(lines)")
    #expect(lines.last == "answered by p2", "\(lines) / p1: \(h.lines("com.test.p1"))")
    #expect(
      h.lines("com.test.p1").contains("serve again -> \(FORSETTI_ERR_DENIED)"), "\(h.lines("com.test.p1"))")
  }
}
