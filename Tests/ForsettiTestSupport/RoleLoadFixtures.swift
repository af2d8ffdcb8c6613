import Foundation

/// C modules for role calls under load (issue 39, ABI 1.3): slow providers and the consumers
/// that flood them, a provider that declares its concurrency, deadlines, call cycles, a
/// provider stuck for good, and the modules built once for ABI 1.2 (`Tests/Fixtures/abi-1.2`).
/// Every consumer logs what it was answered as `key=value` words (`RoleLoadFixtures.words`), so
/// that the tests judge statuses and log lines, never times.
public enum RoleLoadFixtures {
  /// The role service constants of `host.h`, by role.
  public static func service(_ role: String) -> String {
    switch role {
    case "shared_database": "FORSETTI_SERVICE_ROLE_SHARED_DATABASE"
    case "authentication": "FORSETTI_SERVICE_ROLE_AUTHENTICATION"
    case "api": "FORSETTI_SERVICE_ROLE_API"
    case "diagnostics": "FORSETTI_SERVICE_ROLE_DIAGNOSTICS"
    default: "FORSETTI_SERVICE_ROLE_SECURITY"
    }
  }

  // MARK: Manifests

  /// The manifest words of a module holding `role`.
  public static func holds(_ role: String) -> String { #","defaultModuleRole":"\#(role)""# }

  /// The manifest words of a module consuming shared_database (framework-mediated data).
  public static let consumesSharedDatabase =
    #","manifestTemplateVersion":"1.1","runtimeRequirements":{"io":[],"dataIsolation":{"mode":"framework_mediated_shared"}}"#

  /// The manifest words of a module consuming `roles` (`requiredDefaultRoles`).
  public static func requires(_ roles: [String]) -> String {
    let list = roles.map { "\"\($0)\"" }.joined(separator: ",")
    return
      #","manifestTemplateVersion":"1.1","runtimeRequirements":{"io":[],"dataIsolation":{"mode":"private_to_module","ownedStoreIDs":["s"],"requiredDefaultRoles":[\#(list)]}}"#
  }

  /// The manifest words of a module consuming `role`: shared_database as data, any other role
  /// through `requiredDefaultRoles`.
  public static func consumes(_ role: String) -> String {
    role == "shared_database" ? consumesSharedDatabase : requires([role])
  }

  // MARK: Reading the logs

  /// The `key=value` words of a line, values as integers where they are.
  /// `"counts ok=3 busy=0"` → `["ok": 3, "busy": 0]`.
  public static func words(_ line: String) -> [String: Int] {
    var out: [String: Int] = [:]
    for word in line.split(separator: " ") {
      let parts = word.split(separator: "=", maxSplits: 1)
      if parts.count == 2, let v = Int(parts[1]) { out[String(parts[0])] = v }
    }
    return out
  }

  /// The lines of `host.log` under `state`, in the order the host wrote them (standard output and
  /// error split a run's lines by level; the file keeps one order). Each line as the run's
  /// output shows it: from its `[` on, without the time and level.
  public static func hostLog(_ stateDirectory: String) -> [String] {
    let text = (try? String(contentsOfFile: stateDirectory + "/logs/host.log", encoding: .utf8)) ?? ""
    return text.split(separator: "\n").map { line in
      line.firstIndex(of: "[").map { String(line[$0...]) } ?? String(line)
    }
  }

  /// C shared by the fixtures below: threads, a sleep, a clock, an answer, and whether a role
  /// table has the ABI 1.3 fields.
  static let common = """
    #include <errno.h>
    #include <pthread.h>
    #include <stddef.h>
    #include <time.h>
    #define ROLE_HAS_1_3(r) ((r)->struct_size >= offsetof(forsetti_role_service, time_left_ns) + sizeof(void *))
    __attribute__((unused)) static void sleep_ms(long ms) {
      struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
      while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
    }
    __attribute__((unused)) static long long now_ms(clockid_t clock) {
      struct timespec t; clock_gettime(clock, &t);
      return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
    }
    __attribute__((unused)) static void answer(void *resp, size_t cap, size_t *rlen, const char *text) {
      size_t n = strlen(text); if (n > cap) n = cap;
      memcpy(resp, text, n); *rlen = n;
    }
    """

  // MARK: Slow providers and their consumers

  /// A provider of `role`: `slow` takes `millis` ms (sleeping) and answers "ok"; anything else
  /// ("ping") answers "ok" at once. It serves with `serve`, so one call at a time. It logs
  /// `serving pid=N` at each start, with `logEachCall` `slow call from CALLER` as a `slow` call
  /// begins, and with `reportEverySeconds` `served N` (slow calls done) that often.
  public static func slowProvider(
    moduleID: String, entryPoint: String, role: String = "shared_database", millis: Int,
    logEachCall: Bool = false, reportEverySeconds: Int = 0
  ) -> ModuleFixture {
    var f = ModuleFixture(moduleID: moduleID, entryPoint: entryPoint)
    f.prelude =
      common + """

        #define MILLIS \(millis)
        #define LOG_EACH \(logEachCall ? 1 : 0)
        #define REPORT_EVERY_S \(reportEverySeconds)
        static const forsetti_role_service *g_role;
        static unsigned long g_served;
        static volatile int g_run;
        static pthread_t g_reporter;
        static int g_reporting;
        static forsetti_status handle(void *ctx, const char *caller, const char *method, const void *req,
                                      size_t len, void *resp, size_t cap, size_t *rlen) {
          (void)ctx; (void)req; (void)len;
          if (strcmp(method, "slow") == 0) {
            if (LOG_EACH) { char l[300]; snprintf(l, sizeof l, "slow call from %s", caller); fixture_log(l); }
            sleep_ms(MILLIS);
            __atomic_add_fetch(&g_served, 1, __ATOMIC_SEQ_CST);
          }
          answer(resp, cap, rlen, "ok");
          return FORSETTI_OK;
        }
        static void *report(void *a) {
          (void)a;
          for (long tick = 1; g_run; tick++) {
            sleep_ms(100);
            if (tick % (REPORT_EVERY_S > 0 ? REPORT_EVERY_S * 10 : 1) == 0) {
              char l[64]; snprintf(l, sizeof l, "served %lu", __atomic_load_n(&g_served, __ATOMIC_SEQ_CST));
              fixture_log(l);
            }
          }
          return NULL;
        }
        """
    f.start = """
      g_role = host->resolve(\(service(role)));
      if (!g_role) { fixture_log("no role service"); return FORSETTI_ERR_START_FAILED; }
      char l[64]; snprintf(l, sizeof l, "serving pid=%d", (int)getpid()); fixture_log(l);
      g_run = 1;
      if (REPORT_EVERY_S > 0) g_reporting = pthread_create(&g_reporter, NULL, report, NULL) == 0;
      return g_role->serve(handle, NULL) == FORSETTI_OK ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    f.stop = "g_run = 0; if (g_reporting) pthread_join(g_reporter, NULL);"
    return f
  }

  /// A consumer of `role` whose `threads` threads call `method` in a loop — `calls` times each,
  /// or (0) until the module stops — after `startDelayMillis`, pausing `pauseMillis` between
  /// calls (and 100 ms after an answer other than OK or TIMEOUT, which comes at once). It counts
  /// what it is answered: OK, BUSY, TIMEOUT, anything else (the last such status kept). Every
  /// `reportEveryMillis` (0: never) it logs
  /// `counts ok=N busy=N timeout=N other=N last_other=S`; with `calls`, once every thread is
  /// done, the same words after `done`.
  public static func loadConsumer(
    moduleID: String, entryPoint: String, role: String = "shared_database", threads: Int,
    method: String, calls: Int = 0, pauseMillis: Int = 0, startDelayMillis: Int = 0,
    reportEveryMillis: Int = 0
  ) -> ModuleFixture {
    var f = ModuleFixture(moduleID: moduleID, entryPoint: entryPoint)
    f.prelude =
      common + """

        #define THREADS \(threads)
        #define CALLS \(calls)
        #define PAUSE_MS \(pauseMillis)
        #define DELAY_MS \(startDelayMillis)
        #define REPORT_MS \(reportEveryMillis)
        static const forsetti_role_service *g_role;
        static volatile int g_run;
        static int g_ok, g_busy, g_timeout, g_other, g_last_other, g_finished, g_reporting;
        static pthread_t g_threads[THREADS], g_reporter;
        static void log_counts(const char *what) {
          char l[200];
          snprintf(l, sizeof l, "%s ok=%d busy=%d timeout=%d other=%d last_other=%d", what,
                   __atomic_load_n(&g_ok, __ATOMIC_SEQ_CST), __atomic_load_n(&g_busy, __ATOMIC_SEQ_CST),
                   __atomic_load_n(&g_timeout, __ATOMIC_SEQ_CST), __atomic_load_n(&g_other, __ATOMIC_SEQ_CST),
                   __atomic_load_n(&g_last_other, __ATOMIC_SEQ_CST));
          fixture_log(l);
        }
        static void *caller(void *a) {
          (void)a;
          if (DELAY_MS > 0) sleep_ms(DELAY_MS);
          for (int i = 0; g_run && (CALLS == 0 || i < CALLS); i++) {
            char out[64]; size_t n = 0;
            forsetti_status s = g_role->call("\(method)", "", 0, out, sizeof out, &n);
            if (s == FORSETTI_OK) __atomic_add_fetch(&g_ok, 1, __ATOMIC_SEQ_CST);
            else if (s == FORSETTI_ERR_BUSY) __atomic_add_fetch(&g_busy, 1, __ATOMIC_SEQ_CST);
            else if (s == FORSETTI_ERR_TIMEOUT) __atomic_add_fetch(&g_timeout, 1, __ATOMIC_SEQ_CST);
            else { __atomic_store_n(&g_last_other, s, __ATOMIC_SEQ_CST); __atomic_add_fetch(&g_other, 1, __ATOMIC_SEQ_CST); }
            if (s != FORSETTI_OK && s != FORSETTI_ERR_TIMEOUT) sleep_ms(100);
            if (PAUSE_MS > 0) sleep_ms(PAUSE_MS);
          }
          if (__atomic_add_fetch(&g_finished, 1, __ATOMIC_SEQ_CST) == THREADS && CALLS > 0) log_counts("done");
          return NULL;
        }
        static void *report(void *a) {
          (void)a;
          for (long waited = 100; g_run; waited += 100) {
            sleep_ms(100);
            if (waited % (REPORT_MS > 0 ? REPORT_MS : 100) == 0) log_counts("counts");
          }
          return NULL;
        }
        """
    f.start = """
      g_role = host->resolve(\(service(role)));
      if (!g_role) { fixture_log("no role service"); return FORSETTI_ERR_START_FAILED; }
      g_run = 1;
      for (int i = 0; i < THREADS; i++)
        if (pthread_create(&g_threads[i], NULL, caller, NULL) != 0) return FORSETTI_ERR_START_FAILED;
      if (REPORT_MS > 0) g_reporting = pthread_create(&g_reporter, NULL, report, NULL) == 0;
      return FORSETTI_OK;
      """
    // The callers are not joined: one may wait in a call up to its deadline, longer than a stop
    // may take, and the worker ends with the stop.
    f.stop = "g_run = 0; if (g_reporting) pthread_join(g_reporter, NULL);"
    return f
  }

  // MARK: One burst of calls at once

  /// A provider of `role` that measures how many calls it runs at once: `meter` (request: a
  /// bound in ms, as text) counts itself in, waits until `target` calls are inside or the bound
  /// passes (polling), and answers the most calls it has seen inside at once. `ping` answers
  /// at once. With `concurrency` it serves with `serve_concurrently(…, concurrency)` (failing
  /// its start, with a line, on a role table older than ABI 1.3), without it with `serve`.
  public static func meterProvider(
    moduleID: String, entryPoint: String, role: String, concurrency: Int?, target: Int
  ) -> ModuleFixture {
    var f = ModuleFixture(moduleID: moduleID, entryPoint: entryPoint)
    f.prelude =
      common + """

        #define TARGET \(target)
        static const forsetti_role_service *g_role;
        static int g_inside, g_max;
        static forsetti_status handle(void *ctx, const char *caller, const char *method, const void *req,
                                      size_t len, void *resp, size_t cap, size_t *rlen) {
          (void)ctx; (void)caller;
          if (strcmp(method, "meter") != 0) { answer(resp, cap, rlen, "0"); return FORSETTI_OK; }
          char b[32]; size_t k = len < sizeof b - 1 ? len : sizeof b - 1;
          memcpy(b, req, k); b[k] = 0;
          long bound = atol(b);
          int now = __atomic_add_fetch(&g_inside, 1, __ATOMIC_SEQ_CST);
          int m = __atomic_load_n(&g_max, __ATOMIC_SEQ_CST);
          while (now > m && !__atomic_compare_exchange_n(&g_max, &m, now, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
          long long until = now_ms(CLOCK_MONOTONIC) + bound;
          while (__atomic_load_n(&g_inside, __ATOMIC_SEQ_CST) < TARGET && now_ms(CLOCK_MONOTONIC) < until) sleep_ms(10);
          int seen = __atomic_load_n(&g_max, __ATOMIC_SEQ_CST);
          __atomic_sub_fetch(&g_inside, 1, __ATOMIC_SEQ_CST);
          char o[16]; snprintf(o, sizeof o, "%d", seen);
          answer(resp, cap, rlen, o);
          return FORSETTI_OK;
        }
        """
    let serve: String
    if let concurrency {
      serve = """
        if (!ROLE_HAS_1_3(g_role)) { fixture_log("role table older than ABI 1.3"); return FORSETTI_ERR_START_FAILED; }
        forsetti_status s = g_role->serve_concurrently(handle, NULL, \(concurrency));
        char l[64]; snprintf(l, sizeof l, "serve_concurrently(\(concurrency)) -> %d", s); fixture_log(l);
        return s == FORSETTI_OK ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
        """
    } else {
      serve = "return g_role->serve(handle, NULL) == FORSETTI_OK ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;"
    }
    f.start = """
      g_role = host->resolve(\(service(role)));
      if (!g_role) { fixture_log("no role service"); return FORSETTI_ERR_START_FAILED; }
      \(serve)
      """
    return f
  }

  /// A consumer of `role` that first calls `ping` until it is answered other than UNAVAILABLE
  /// (the provider serves, the channel is made), then releases `threads` threads at once (a
  /// barrier), each calling `method` with `request` once. At each BUSY answer it reads how many
  /// OK answers had arrived already; none should have. It logs
  /// `burst ok=N busy=N timeout=N other=N last_other=S busy_after_ok=N max=N` (`max`: the
  /// largest number any OK answer held).
  public static func burstConsumer(
    moduleID: String, entryPoint: String, role: String, threads: Int, method: String, request: String
  ) -> ModuleFixture {
    var f = ModuleFixture(moduleID: moduleID, entryPoint: entryPoint)
    f.prelude =
      common + """

        #define THREADS \(threads)
        static const forsetti_role_service *g_role;
        static pthread_t g_main;
        static pthread_barrier_t g_barrier;
        static int g_ok, g_busy, g_timeout, g_other, g_last_other, g_busy_after_ok, g_max;
        static void *one(void *a) {
          (void)a;
          char out[64]; size_t n = 0;
          pthread_barrier_wait(&g_barrier);
          forsetti_status s = g_role->call("\(method)", "\(request)", strlen("\(request)"), out, sizeof out - 1, &n);
          if (s == FORSETTI_OK) {
            __atomic_add_fetch(&g_ok, 1, __ATOMIC_SEQ_CST);
            out[n < sizeof out ? n : 0] = 0;
            int v = atoi(out), m = __atomic_load_n(&g_max, __ATOMIC_SEQ_CST);
            while (v > m && !__atomic_compare_exchange_n(&g_max, &m, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
          } else if (s == FORSETTI_ERR_BUSY) {
            if (__atomic_load_n(&g_ok, __ATOMIC_SEQ_CST) > 0) __atomic_add_fetch(&g_busy_after_ok, 1, __ATOMIC_SEQ_CST);
            __atomic_add_fetch(&g_busy, 1, __ATOMIC_SEQ_CST);
          } else if (s == FORSETTI_ERR_TIMEOUT) {
            __atomic_add_fetch(&g_timeout, 1, __ATOMIC_SEQ_CST);
          } else {
            __atomic_store_n(&g_last_other, s, __ATOMIC_SEQ_CST);
            __atomic_add_fetch(&g_other, 1, __ATOMIC_SEQ_CST);
          }
          return NULL;
        }
        static void *run(void *a) {
          (void)a;
          char out[64]; size_t n = 0; forsetti_status s = FORSETTI_ERR_UNAVAILABLE;
          for (int tries = 0; s == FORSETTI_ERR_UNAVAILABLE && tries < 100; tries++) {
            if (tries) sleep_ms(100);
            s = g_role->call("ping", "", 0, out, sizeof out, &n);
          }
          char l[256]; snprintf(l, sizeof l, "ping -> %d", s); fixture_log(l);
          pthread_t t[THREADS];
          if (pthread_barrier_init(&g_barrier, NULL, THREADS) != 0) { fixture_log("no barrier"); return NULL; }
          for (int i = 0; i < THREADS; i++)
            if (pthread_create(&t[i], NULL, one, NULL) != 0) { fixture_log("no thread"); return NULL; }
          for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
          snprintf(l, sizeof l, "burst ok=%d busy=%d timeout=%d other=%d last_other=%d busy_after_ok=%d max=%d",
                   g_ok, g_busy, g_timeout, g_other, g_last_other, g_busy_after_ok, g_max);
          fixture_log(l);
          return NULL;
        }
        """
    f.start = """
      g_role = host->resolve(\(service(role)));
      if (!g_role) { fixture_log("no role service"); return FORSETTI_ERR_START_FAILED; }
      return pthread_create(&g_main, NULL, run, NULL) == 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    return f
  }

  // MARK: Deadlines

  /// A provider of shared_database serving one call at a time (`serve`): `left` answers
  /// `time_left_ns()` as decimal text; `slow` logs `slow ran TAG` (the request) and answers
  /// "ok" after 3 s; `ping` answers at once. Fails its start, with a line, on a role table older
  /// than ABI 1.3.
  public static func deadlineProvider(moduleID: String, entryPoint: String) -> ModuleFixture {
    var f = ModuleFixture(moduleID: moduleID, entryPoint: entryPoint)
    f.prelude =
      common + """

        static const forsetti_role_service *g_role;
        static forsetti_status handle(void *ctx, const char *caller, const char *method, const void *req,
                                      size_t len, void *resp, size_t cap, size_t *rlen) {
          (void)ctx; (void)caller;
          char o[64];
          if (strcmp(method, "left") == 0) {
            snprintf(o, sizeof o, "%llu", (unsigned long long)g_role->time_left_ns());
          } else if (strcmp(method, "slow") == 0) {
            char l[128]; snprintf(l, sizeof l, "slow ran %.*s", (int)(len < 32 ? len : 32), (const char *)req);
            fixture_log(l);
            sleep_ms(3000);
            snprintf(o, sizeof o, "ok");
          } else {
            snprintf(o, sizeof o, "ok");
          }
          answer(resp, cap, rlen, o);
          return FORSETTI_OK;
        }
        """
    f.start = """
      g_role = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      if (!g_role) { fixture_log("no role service"); return FORSETTI_ERR_START_FAILED; }
      if (!ROLE_HAS_1_3(g_role)) { fixture_log("role table older than ABI 1.3"); return FORSETTI_ERR_START_FAILED; }
      return g_role->serve(handle, NULL) == FORSETTI_OK ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    return f
  }

  /// The consumer of `deadlineProvider`. After `ping` is answered other than UNAVAILABLE:
  /// reads `time_left_ns()` on its own thread (serving no call: 0), calls `left` with
  /// `call_within(2000, …)` and then with plain `call`, and logs
  /// `left outside=N within_status=S within=N plain_status=S plain=N`. Then one thread calls
  /// `slow` ("first", plain) and, 300 ms later, another calls `call_within(500, "slow",
  /// "second")`, queued behind the first; once both are answered a third, plain ("third"), is
  /// called. It logs `slow first=S second=S third=S`, then `deadlines done`.
  public static func deadlineConsumer(moduleID: String, entryPoint: String) -> ModuleFixture {
    var f = ModuleFixture(moduleID: moduleID, entryPoint: entryPoint)
    f.prelude =
      common + """

        static const forsetti_role_service *g_role;
        static pthread_t g_main;
        static forsetti_status g_first;
        static void *first(void *a) {
          (void)a; char out[64]; size_t n = 0;
          g_first = g_role->call("slow", "first", 5, out, sizeof out, &n);
          return NULL;
        }
        static unsigned long long number(forsetti_status s, const char *out, size_t n) {
          char b[64]; if (s != FORSETTI_OK || n >= sizeof b) return 0;
          memcpy(b, out, n); b[n] = 0;
          return strtoull(b, NULL, 10);
        }
        static void *run(void *a) {
          (void)a;
          char out[64], l[256]; size_t n = 0; forsetti_status s = FORSETTI_ERR_UNAVAILABLE;
          for (int tries = 0; s == FORSETTI_ERR_UNAVAILABLE && tries < 100; tries++) {
            if (tries) sleep_ms(100);
            s = g_role->call("ping", "", 0, out, sizeof out, &n);
          }
          snprintf(l, sizeof l, "ping -> %d", s); fixture_log(l);
          unsigned long long outside = g_role->time_left_ns();
          n = 0;
          forsetti_status ws = g_role->call_within(2000, "left", "", 0, out, sizeof out, &n);
          unsigned long long within = number(ws, out, n);
          n = 0;
          forsetti_status ps = g_role->call("left", "", 0, out, sizeof out, &n);
          unsigned long long plain = number(ps, out, n);
          snprintf(l, sizeof l, "left outside=%llu within_status=%d within=%llu plain_status=%d plain=%llu",
                   outside, ws, within, ps, plain);
          fixture_log(l);
          pthread_t t;
          if (pthread_create(&t, NULL, first, NULL) != 0) { fixture_log("no thread"); return NULL; }
          sleep_ms(300);
          n = 0;
          forsetti_status second = g_role->call_within(500, "slow", "second", 6, out, sizeof out, &n);
          pthread_join(t, NULL);
          n = 0;
          forsetti_status third = g_role->call("slow", "third", 5, out, sizeof out, &n);
          snprintf(l, sizeof l, "slow first=%d second=%d third=%d", g_first, second, third);
          fixture_log(l);
          fixture_log("deadlines done");
          return NULL;
        }
        """
    f.start = """
      g_role = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      if (!g_role) { fixture_log("no role service"); return FORSETTI_ERR_START_FAILED; }
      if (!ROLE_HAS_1_3(g_role)) { fixture_log("role table older than ABI 1.3"); return FORSETTI_ERR_START_FAILED; }
      return pthread_create(&g_main, NULL, run, NULL) == 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    return f
  }

  // MARK: Cycles

  /// A module of a cycle: it serves `serves` (a role) and its handler, after `sleepMillis`,
  /// calls `calls` (a role) with method `cycle` — from its own thread, or with `freshThread`
  /// from a thread it starts for the call and joins. It logs
  /// `from CALLER: inner S` (`(fresh thread)` after) and answers `TAG=S(INNER)`: the status of
  /// its call and what that call answered, so the outside caller sees the whole chain, e.g.
  /// `B=0(C=0(A=-13()))`.
  public static func cycleMember(
    moduleID: String, entryPoint: String, tag: String, serves: String, calls: String,
    freshThread: Bool = false, sleepMillis: Int = 0
  ) -> ModuleFixture {
    var f = ModuleFixture(moduleID: moduleID, entryPoint: entryPoint)
    f.prelude =
      common + """

        #define FRESH \(freshThread ? 1 : 0)
        #define SLEEP_MS \(sleepMillis)
        static const forsetti_role_service *mine, *theirs;
        struct inner { char out[512]; size_t n; forsetti_status s; };
        static void *inner_call(void *a) {
          struct inner *in = a; in->n = 0;
          in->s = theirs->call("cycle", "", 0, in->out, sizeof in->out - 1, &in->n);
          in->out[in->s == FORSETTI_OK && in->n < sizeof in->out ? in->n : 0] = 0;
          return NULL;
        }
        static forsetti_status handle(void *ctx, const char *caller, const char *method, const void *req,
                                      size_t len, void *resp, size_t cap, size_t *rlen) {
          (void)ctx; (void)method; (void)req; (void)len;
          if (SLEEP_MS > 0) sleep_ms(SLEEP_MS);
          struct inner in;
          if (FRESH) {
            pthread_t t;
            if (pthread_create(&t, NULL, inner_call, &in) != 0) { fixture_log("no thread"); return FORSETTI_ERR_IO; }
            pthread_join(t, NULL);
          } else {
            inner_call(&in);
          }
          char l[700]; snprintf(l, sizeof l, "from %s: inner %d%s", caller, in.s, FRESH ? " (fresh thread)" : "");
          fixture_log(l);
          char o[600]; snprintf(o, sizeof o, "\(tag)=%d(%s)", in.s, in.out);
          answer(resp, cap, rlen, o);
          return FORSETTI_OK;
        }
        """
    f.start = """
      mine = host->resolve(\(service(serves))); theirs = host->resolve(\(service(calls)));
      if (!mine || !theirs) { fixture_log("no role services"); return FORSETTI_ERR_START_FAILED; }
      return mine->serve(handle, NULL) == FORSETTI_OK ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    return f
  }

  /// A consumer of `role` that calls `method` until it has `rounds` answers in which nothing was
  /// UNAVAILABLE (its own call, or any `=-10(` of a chain: a module of the cycle not serving
  /// yet), at most 120 tries. With `alignMillis`, each call starts at the next multiple of
  /// that many ms of the real-time clock, so that two such consumers in two workers call at the
  /// same moment; without, tries are 250 ms apart. Logs `round I -> S ANSWER` for each round
  /// counted, then `rounds done` (or `rounds gave up`).
  public static func roundsConsumer(
    moduleID: String, entryPoint: String, role: String, method: String, rounds: Int,
    alignMillis: Int? = nil
  ) -> ModuleFixture {
    var f = ModuleFixture(moduleID: moduleID, entryPoint: entryPoint)
    f.prelude =
      common + """

        #define ROUNDS \(rounds)
        #define ALIGN_MS \(alignMillis ?? 0)
        static const forsetti_role_service *g_role;
        static pthread_t g_main;
        static void *run(void *a) {
          (void)a;
          int counted = 0;
          for (int tries = 0; counted < ROUNDS && tries < 120; tries++) {
            if (ALIGN_MS > 0) {
              long long now = now_ms(CLOCK_REALTIME), step = ALIGN_MS > 0 ? ALIGN_MS : 1;
              sleep_ms((long)((now / step + 1) * step - now));
            } else if (tries) {
              sleep_ms(250);
            }
            char out[600], l[700]; size_t n = 0;
            forsetti_status s = g_role->call("\(method)", "", 0, out, sizeof out - 1, &n);
            out[s == FORSETTI_OK && n < sizeof out ? n : 0] = 0;
            if (s == FORSETTI_ERR_UNAVAILABLE || strstr(out, "=-10(")) continue;
            snprintf(l, sizeof l, "round %d -> %d %s", ++counted, s, out);
            fixture_log(l);
          }
          fixture_log(counted == ROUNDS ? "rounds done" : "rounds gave up");
          return NULL;
        }
        """
    f.start = """
      g_role = host->resolve(\(service(role)));
      if (!g_role) { fixture_log("no role service"); return FORSETTI_ERR_START_FAILED; }
      return pthread_create(&g_main, NULL, run, NULL) == 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    return f
  }

  // MARK: Stuck for good

  /// A provider of `role` stuck for good in one call: `hang` logs `hanging`, then sleeps
  /// forever; anything else answers "ok". Logs `serving pid=N` at each start.
  public static func stuckProvider(moduleID: String, entryPoint: String, role: String) -> ModuleFixture {
    var f = ModuleFixture(moduleID: moduleID, entryPoint: entryPoint)
    f.prelude = """
      static forsetti_status handle(void *ctx, const char *caller, const char *method, const void *req,
                                    size_t len, void *resp, size_t cap, size_t *rlen) {
        (void)ctx; (void)caller; (void)req; (void)len;
        if (strcmp(method, "hang") == 0) {
          fixture_log("hanging");
          for (;;) sleep(1000);
        }
        if (cap < 2) return FORSETTI_ERR_BUFFER_TOO_SMALL;
        memcpy(resp, "ok", 2); *rlen = 2;
        return FORSETTI_OK;
      }
      """
    f.start = """
      const forsetti_role_service *r = host->resolve(\(service(role)));
      if (!r) { fixture_log("no role service"); return FORSETTI_ERR_START_FAILED; }
      char l[64]; snprintf(l, sizeof l, "serving pid=%d", (int)getpid()); fixture_log(l);
      return r->serve(handle, NULL) == FORSETTI_OK ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    return f
  }

  // MARK: Built once for ABI 1.2

  /// `Tests/Fixtures/abi-1.2`: the headers of ABI 1.2 and the modules built against them once.
  public static var keptDirectory: String {
    (HostBinary.packageRoot as NSString).appendingPathComponent("Tests/Fixtures/abi-1.2")
  }

  /// Installs the kept binary `bin/<name>.so` of `keptDirectory` into `plugins/` of `dir` as it
  /// is (copied, never rebuilt), with a manifest for `moduleID` and `entryPoint` in
  /// `manifests/`. Returns the installed path.
  @discardableResult
  public static func installKept(
    _ name: String, moduleID: String, entryPoint: String, version: (Int, Int, Int) = (1, 2, 0),
    in dir: TemporaryDirectory, capabilities: [String], manifestExtra: String
  ) throws -> String {
    var manifest = ModuleFixture(moduleID: moduleID, entryPoint: entryPoint)
    manifest.version = version
    try dir.write(
      "manifests/\(name).json", manifest.manifest(capabilities: capabilities, extra: manifestExtra))
    let source = (keptDirectory as NSString).appendingPathComponent("bin/\(name).so")
    let bytes = try Data(contentsOf: URL(fileURLWithPath: source))
    return try dir.write("plugins/\(name).so", bytes: Array(bytes))
  }
}
