/// The hung role provider and its consumer (issue 25), shared by the runtime's and the CLI's
/// tests: one C source each, so both suites break the same promise the same way.
public enum HungRoleFixtures {
  /// A provider of shared_database: `hang` publishes `test.hang.entered` from inside its handler,
  /// then never returns; anything else is echoed.
  public static func provider(moduleID: String, entryPoint: String) -> ModuleFixture {
    var f = ModuleFixture(moduleID: moduleID, entryPoint: entryPoint)
    f.prelude = """
      static const forsetti_events *g_events;
      static forsetti_status handle(void *ctx, const char *caller, const char *method, const void *req,
                                    size_t len, void *resp, size_t cap, size_t *rlen) {
        (void)ctx; (void)caller; (void)req; (void)len;
        if (strcmp(method, "hang") == 0) {
          fixture_log("hanging");
          g_events->publish("test.hang.entered", "", 0);
          for (;;) sleep(1000);
        }
        if (cap < 2) return FORSETTI_ERR_BUFFER_TOO_SMALL;
        memcpy(resp, "ok", 2); *rlen = 2;
        return FORSETTI_OK;
      }
      """
    f.start = """
      g_events = host->resolve(FORSETTI_SERVICE_EVENTS);
      const forsetti_role_service *r = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      if (!g_events || !r) return FORSETTI_ERR_START_FAILED;
      return r->serve(handle, NULL) == FORSETTI_OK ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    return f
  }

  /// A consumer whose thread calls `hang` (its first call of the role) `times` times in a row,
  /// logging each status. When the provider says it is inside the handler (the event), the
  /// consumer publishes 50 events from its delivery thread and logs whether its role call was
  /// still outstanding when the last one was answered.
  public static func consumer(moduleID: String, entryPoint: String, times: Int) -> ModuleFixture {
    var f = ModuleFixture(moduleID: moduleID, entryPoint: entryPoint)
    f.prelude = """
      #include <pthread.h>
      static const forsetti_role_service *g_db;
      static const forsetti_events *g_events;
      static volatile int g_outstanding, g_run, g_rounds;
      static pthread_t g_thread;
      static void entered(void *c, const char *s, const char *t, const void *p, size_t n) {
        (void)c; (void)s; (void)t; (void)p; (void)n;
        if (g_rounds++) return;
        int ok = 0;
        for (int i = 0; i < 50; i++) ok += g_events->publish("test.hang.tick", "", 0) == FORSETTI_OK;
        char line[128];
        snprintf(line, sizeof line, "published %d of 50; call outstanding=%d", ok, g_outstanding);
        fixture_log(line);
      }
      static void *loop(void *arg) {
        (void)arg;
        char out[16]; size_t n = 0; char line[64];
        for (int i = 0; g_run && i < \(times); i++) {
          g_outstanding = 1;
          forsetti_status s = g_db->call("hang", "", 0, out, sizeof out, &n);
          g_outstanding = 0;
          snprintf(line, sizeof line, "hang -> %d", s); fixture_log(line);
          if (s == FORSETTI_ERR_UNAVAILABLE) { usleep(100000); i--; }
        }
        return NULL;
      }
      """
    f.start = """
      g_db = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      g_events = host->resolve(FORSETTI_SERVICE_EVENTS);
      if (!g_db || !g_events || g_events->subscribe("test.hang.entered", entered, NULL) <= 0)
        return FORSETTI_ERR_START_FAILED;
      g_run = 1;
      return pthread_create(&g_thread, NULL, loop, NULL) == 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    f.stop = "g_run = 0;"
    return f
  }
}
