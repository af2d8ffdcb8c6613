/// Modules that flood the host's logs, and one that logs calmly beside them: shared by the
/// runtime's log tests and the tests that run the real host as root and as another user.
public enum FloodFixtures {
  /// A module whose threads write as fast as they can for `seconds` through its log call, its
  /// standard output and telemetry, until stopped.
  public static func flooder(seconds: Int, through channels: Set<String> = ["log", "output", "telemetry"])
    -> ModuleFixture
  {
    var f = ModuleFixture(moduleID: "com.test.flood", entryPoint: "flood_entry")
    f.prelude = """
      #include <pthread.h>
      #include <time.h>
      static volatile int g_stop;
      static const forsetti_telemetry *g_telemetry;
      static pthread_t g_threads[3];
      static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
      static void *idle(void *a) { (void)a; return NULL; }
      static void *flood_log(void *a) {
        (void)a; char line[160]; unsigned long n = 0; double end = now() + \(seconds);
        while (!g_stop && now() < end) {
          snprintf(line, sizeof line, "flood log %lu .................................................................", n++);
          g_host->log(FORSETTI_LOG_INFO, line);
        }
        return NULL;
      }
      static void *flood_output(void *a) {
        (void)a; char line[160]; unsigned long n = 0; double end = now() + \(seconds);
        while (!g_stop && now() < end) {
          int len = snprintf(line, sizeof line, "flood stdout %lu ..............................................................\\n", n++);
          if (write(1, line, len) < 0) break;
        }
        return NULL;
      }
      static void *flood_telemetry(void *a) {
        (void)a; double end = now() + \(seconds);
        while (!g_stop && now() < end) g_telemetry->record("flood.event", "{\\"padding\\":\\"..............................................\\"}");
        return NULL;
      }
      """
    f.start = """
      g_telemetry = host->resolve(FORSETTI_SERVICE_TELEMETRY);
      if (!g_telemetry) return FORSETTI_ERR_DENIED;
      pthread_create(&g_threads[0], NULL, \(channels.contains("log") ? "flood_log" : "idle"), NULL);
      pthread_create(&g_threads[1], NULL, \(channels.contains("output") ? "flood_output" : "idle"), NULL);
      pthread_create(&g_threads[2], NULL, \(channels.contains("telemetry") ? "flood_telemetry" : "idle"), NULL);
      return FORSETTI_OK;
      """
    f.stop = "g_stop = 1; for (int i = 0; i < 3; i++) pthread_join(g_threads[i], NULL);"
    return f
  }

  /// A module that logs one line a second, `tick 0` … `tick <count - 1>`.
  public static func ticker(count: Int) -> ModuleFixture {
    var f = ModuleFixture(moduleID: "com.test.healthy", entryPoint: "healthy_entry")
    f.prelude = """
      #include <pthread.h>
      static volatile int g_stop;
      static pthread_t g_thread;
      static void *tick(void *a) {
        (void)a; char line[64];
        for (int i = 0; i < \(count) && !g_stop; i++) {
          snprintf(line, sizeof line, "tick %d", i); g_host->log(FORSETTI_LOG_INFO, line);
          for (int k = 0; k < 10 && !g_stop; k++) usleep(100000);
        }
        return NULL;
      }
      """
    f.start = "pthread_create(&g_thread, NULL, tick, NULL); return FORSETTI_OK;"
    f.stop = "g_stop = 1; pthread_join(g_thread, NULL);"
    return f
  }
}
