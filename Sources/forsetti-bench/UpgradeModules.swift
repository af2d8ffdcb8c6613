/// The C modules of the upgrade section: one library holding a ticker, which publishes from its
/// own thread every 5 ms and records in its sandbox how long its host calls took, and `idle`
/// modules that only say they are up (one entry point each, so the bench compiles once).
enum UpgradeModules {
  static let tickerID = "com.bench.up.ticker"
  static let tickerEntry = "up_ticker_entry"
  /// What the ticker writes into its sandbox (`STATE/sandboxes/<id>/ticks.txt`).
  static let ticksFile = "ticks.txt"
  /// The line every module logs from its start, counted in host.log.
  static let upLine = "bench-up"
  static let tickEveryMS = 5
  static let windowMS = 100

  static func idleID(_ i: Int) -> String { "com.bench.up.idle\(i)" }
  static func idleEntry(_ i: Int) -> String { "up_idle\(i)_entry" }

  /// The library: the ticker and `idle` idle modules.
  ///
  /// The ticker's lines, appended (one `write` each) with CLOCK_MONOTONIC times in ns:
  /// `f FIRST` when its first host call returned; every `windowMS`, `w END MAXCALL MAXCALLSTART
  /// MAXGAP LAST CALLS`: the window's end, its longest single call and when that call began, the
  /// longest time between two consecutive returns (the pause between calls included), the last
  /// return and the calls in it; `s LAST` when it is stopped.
  static func source(idle: Int) -> String {
    var text = """
      #include <forsetti.h>
      #include <fcntl.h>
      #include <pthread.h>
      #include <stdint.h>
      #include <stdio.h>
      #include <string.h>
      #include <time.h>
      #include <unistd.h>

      static const forsetti_host *g_host;
      static const forsetti_events *g_events;
      static volatile int g_stop;
      static pthread_t g_thread;
      static int g_fd = -1;
      static uint64_t g_last;

      static uint64_t now_ns(void) {
        struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
        return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
      }
      static void put(const char *line, int n) { if (g_fd >= 0 && n > 0) (void)!write(g_fd, line, (size_t)n); }
      static void *tick(void *arg) {
        (void)arg;
        char line[200];
        uint64_t window_start = now_ns(), max_call = 0, max_call_start = 0, max_gap = 0;
        unsigned calls = 0;
        while (!g_stop) {
          uint64_t a = now_ns();
          g_events->publish("bench.up.tick", &a, sizeof a);
          uint64_t b = now_ns();
          if (!g_last) put(line, snprintf(line, sizeof line, "f %llu\\n", (unsigned long long)b));
          if (b - a > max_call) { max_call = b - a; max_call_start = a; }
          if (g_last && b - g_last > max_gap) max_gap = b - g_last;
          g_last = b;
          calls++;
          if (b - window_start >= \(windowMS)ull * 1000000ull) {
            put(line, snprintf(line, sizeof line, "w %llu %llu %llu %llu %llu %u\\n", (unsigned long long)b,
                (unsigned long long)max_call, (unsigned long long)max_call_start, (unsigned long long)max_gap,
                (unsigned long long)g_last, calls));
            window_start = b; max_call = 0; max_call_start = 0; max_gap = 0; calls = 0;
          }
          struct timespec p = { 0, \(tickEveryMS)l * 1000000l };
          nanosleep(&p, NULL);
        }
        return NULL;
      }
      static forsetti_status ticker_start(void *self, const forsetti_host *host) {
        (void)self;
        g_host = host;
        g_events = host->resolve(FORSETTI_SERVICE_EVENTS);
        if (!g_events) return FORSETTI_ERR_START_FAILED;
        char path[4096];
        snprintf(path, sizeof path, "%s/\(ticksFile)", host->sandbox_path);
        g_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (g_fd < 0) { host->log(FORSETTI_LOG_ERROR, "bench: cannot open \(ticksFile)"); return FORSETTI_ERR_START_FAILED; }
        host->log(FORSETTI_LOG_INFO, "\(upLine)");
        return pthread_create(&g_thread, NULL, tick, NULL) == 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      }
      static void ticker_stop(void *self) {
        (void)self;
        g_stop = 1;
        pthread_join(g_thread, NULL);
        char line[64];
        put(line, snprintf(line, sizeof line, "s %llu\\n", (unsigned long long)g_last));
        close(g_fd);
      }
      static forsetti_status idle_start(void *self, const forsetti_host *host) {
        (void)self;
        host->log(FORSETTI_LOG_INFO, "\(upLine)");
        return FORSETTI_OK;
      }
      static void idle_stop(void *self) { (void)self; }
      static const forsetti_module_descriptor ticker_d = {
        .struct_size = sizeof(forsetti_module_descriptor), .module_id = "\(tickerID)",
        .module_type = "service", .version_major = 1,
      };
      static const forsetti_module ticker_m = {
        .abi_version = FORSETTI_ABI_VERSION, .struct_size = sizeof(forsetti_module), .descriptor = &ticker_d,
        .start = ticker_start, .stop = ticker_stop,
      };
      const forsetti_module *\(tickerEntry)(uint32_t abi) { (void)abi; return &ticker_m; }

      """
    for i in 0..<idle {
      text += """
        static const forsetti_module_descriptor d\(i) = {
          .struct_size = sizeof(forsetti_module_descriptor), .module_id = "\(idleID(i))",
          .module_type = "service", .version_major = 1,
        };
        static const forsetti_module m\(i) = {
          .abi_version = FORSETTI_ABI_VERSION, .struct_size = sizeof(forsetti_module), .descriptor = &d\(i),
          .start = idle_start, .stop = idle_stop,
        };
        const forsetti_module *\(idleEntry(i))(uint32_t abi) { (void)abi; return &m\(i); }

        """
    }
    return text
  }
}
