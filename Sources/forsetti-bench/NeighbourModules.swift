/// The C modules of the neighbours section: a healthy publisher and subscriber that record their
/// own latencies into their sandboxes, and one hostile module (or pair) per neighbour.
enum NeighbourModules {
  static let healthyID = "com.bench.healthy"
  static let listenerID = "com.bench.listener"

  /// What every module here shares: threads, a monotonic clock, samples written to the sandbox
  /// only after the measured window (tmp + rename, so the bench never reads half a file).
  static let common = """
    #include <pthread.h>
    #include <stdint.h>
    #include <stdlib.h>
    #include <string.h>
    #include <sys/mman.h>
    #include <unistd.h>
    #define MAX_SAMPLES 65536
    static const forsetti_host *h;
    static const forsetti_events *ev;
    static uint64_t now_ns(void) {
      struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
      return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
    }
    static void pause_ms(long ms) {
      struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
      while (nanosleep(&t, &t) != 0) {}
    }
    static void write_samples(const char *name, const uint64_t *v, int n) {
      char path[4096], tmp[4200];
      snprintf(path, sizeof path, "%s/%s", h->sandbox_path, name);
      snprintf(tmp, sizeof tmp, "%s.tmp", path);
      FILE *f = fopen(tmp, "w");
      if (!f) { h->log(FORSETTI_LOG_ERROR, "bench: cannot write the samples"); return; }
      for (int i = 0; i < n; i++) fprintf(f, "%llu\\n", (unsigned long long)v[i]);
      fclose(f);
      rename(tmp, path);
    }
    static int spawn_threads(int n, void *(*fn)(void *), void *arg) {
      for (int i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, fn, arg) != 0) return -1;
        pthread_detach(t);
      }
      return 0;
    }
    """

  /// The healthy module: after `warmupMS`, publishes `bench.tick` (its send time as the payload)
  /// once a millisecond for `windowMS`, timing each call; then `bench.done` and calls.txt. With
  /// `callsRole`, another of its threads calls the shared_database role in a loop.
  static func healthy(warmupMS: Int, windowMS: Int, callsRole: Bool) -> Fixtures.Module {
    Fixtures.module(
      id: healthyID, entry: callsRole ? "healthy_consumer_entry" : "healthy_entry",
      start: """
        h = host;
        ev = host->resolve(FORSETTI_SERVICE_EVENTS);
        if (!ev) return FORSETTI_ERR_START_FAILED;
        #if CALLS_ROLE
        const forsetti_role_service *r = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
        if (!r || spawn_threads(1, role_caller, (void *)r) != 0) return FORSETTI_ERR_START_FAILED;
        #endif
        return spawn_threads(1, measure, NULL) == 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
        """,
      prelude: common + "\n" + """
        #define CALLS_ROLE \(callsRole ? 1 : 0)
        static uint64_t calls[MAX_SAMPLES];
        static int ncalls;
        static void *role_caller(void *arg) {
          const forsetti_role_service *r = arg;
          char out[16]; size_t n;
          for (;;) r->call("get", "x", 1, out, sizeof out, &n);
          return NULL;
        }
        static void *measure(void *arg) {
          (void)arg;
          pause_ms(\(warmupMS));
          uint64_t end = now_ns() + \(windowMS)ull * 1000000ull;
          do {
            uint64_t a = now_ns();
            ev->publish("bench.tick", &a, sizeof a);
            uint64_t b = now_ns();
            if (ncalls < MAX_SAMPLES) calls[ncalls++] = b - a;
            pause_ms(1);
          } while (now_ns() < end);
          ev->publish("bench.done", "", 0);
          write_samples("calls.txt", calls, ncalls);
          return NULL;
        }
        """)
  }

  /// The healthy subscriber: the delay from the tick's send time to its handler, for ticks from
  /// the healthy module only (a flood on the same type is not counted); delivery.txt on `bench.done`.
  static let listener = Fixtures.module(
    id: listenerID, entry: "listener_entry",
    start: """
      h = host;
      ev = host->resolve(FORSETTI_SERVICE_EVENTS);
      if (!ev || ev->subscribe("bench.tick", on_tick, NULL) <= 0 || ev->subscribe("bench.done", on_done, NULL) <= 0)
        return FORSETTI_ERR_START_FAILED;
      return FORSETTI_OK;
      """,
    prelude: common + "\n" + """
      static uint64_t lat[MAX_SAMPLES];
      static int nlat, done;
      static void on_tick(void *c, const char *src, const char *type, const void *p, size_t len) {
        (void)c; (void)type;
        if (len != sizeof(uint64_t) || strcmp(src, "\(healthyID)") != 0) return;
        uint64_t a; memcpy(&a, p, sizeof a);
        uint64_t b = now_ns();
        if (nlat < MAX_SAMPLES) lat[nlat++] = b - a;
      }
      static void on_done(void *c, const char *src, const char *type, const void *p, size_t len) {
        (void)c; (void)type; (void)p; (void)len;
        if (done || strcmp(src, "\(healthyID)") != 0) return;
        done = 1;
        write_samples("delivery.txt", lat, nlat);
      }
      """)

  /// What every hostile module adds: a count of its operations, written with the time since its
  /// start (and the hog's MiB) to ops.txt four times a second, so the bench shows that the
  /// neighbour was at work.
  static let counted =
    common + """

      static uint64_t ops, mib;
      static void *report(void *arg) {
        (void)arg;
        uint64_t t0 = now_ns();
        for (;;) {
          pause_ms(250);
          uint64_t v[3] = { __atomic_load_n(&ops, __ATOMIC_RELAXED), now_ns() - t0, mib };
          write_samples("ops.txt", v, 3);
        }
        return NULL;
      }

      """

  /// A hostile module: `threads` threads running `prepare` once, then `op` forever, counting each
  /// begun (a call that blocks counts once it is made).
  static func hostile(
    _ id: String, threads: Int, globals: String = "", setup: String = "", prepare: String = "", op: String
  ) -> Fixtures.Module {
    let entry = id.split(separator: ".").last.map { "\($0)_entry" } ?? "hostile_entry"
    return Fixtures.module(
      id: id, entry: entry,
      start: """
        h = host;
        ev = host->resolve(FORSETTI_SERVICE_EVENTS);
        \(setup)
        if (spawn_threads(1, report, NULL) != 0) return FORSETTI_ERR_START_FAILED;
        return spawn_threads(\(threads), hostile, NULL) == 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
        """,
      prelude: counted + globals + "\n" + """
        static void *hostile(void *arg) {
          (void)arg;
          \(prepare)
          for (;;) {
            __atomic_fetch_add(&ops, 1, __ATOMIC_RELAXED);
            \(op)
          }
          return NULL;
        }
        """)
  }

  /// 16 threads spinning.
  static let cpu = hostile(
    "com.bench.spin", threads: 16, prepare: "volatile unsigned long x = 0;",
    op: "for (int i = 0; i < 1000; i++) x++;")

  /// Touches pages up to 90% of the memory limit, drops them and touches them again, forever. Where
  /// the worker's address space is the limit (no cgroup), maps as much of that as it can.
  static func memory(limitMiB: Int) -> Fixtures.Module {
    hostile(
      "com.bench.hog", threads: 1,
      prepare: """
        size_t bytes = (size_t)\(limitMiB) * 1024 * 1024 / 10 * 9;
        char *p = MAP_FAILED;
        while (bytes > 16u << 20 && (p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)) == MAP_FAILED)
          bytes -= 8u << 20;
        if (p == MAP_FAILED) { h->log(FORSETTI_LOG_ERROR, "bench: the hog could not map"); return NULL; }
        mib = bytes >> 20;
        """,
      op: """
        for (size_t i = 0; i < bytes; i += 4096) p[i] = 1;
        madvise(p, bytes, MADV_DONTNEED);
        """)
  }

  /// Four threads logging as fast as they can (the host drops what exceeds --log-rate).
  static let logFlood = hostile(
    "com.bench.logger", threads: 4, op: "h->log(FORSETTI_LOG_INFO, \"flood flood flood flood\");")

  /// Four threads publishing as fast as they can, to `type`.
  static func publishFlood(_ id: String, type: String) -> Fixtures.Module {
    hostile(id, threads: 4, op: "ev->publish(\"\(type)\", \"x\", 1);")
  }

  /// The shared_database provider whose handler never returns (its count: calls that reached it).
  static let hungProvider = Fixtures.module(
    id: "com.bench.hung", entry: "hung_entry",
    start: """
      h = host;
      const forsetti_role_service *r = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      if (!r || spawn_threads(1, report, NULL) != 0) return FORSETTI_ERR_START_FAILED;
      return r->serve(never, NULL) == FORSETTI_OK ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """,
    prelude: counted + """
      static forsetti_status never(void *c, const char *caller, const char *method, const void *req, size_t len,
                                   void *resp, size_t cap, size_t *rlen) {
        (void)c; (void)caller; (void)method; (void)req; (void)len; (void)resp; (void)cap; (void)rlen;
        __atomic_fetch_add(&ops, 1, __ATOMIC_RELAXED);
        for (;;) sleep(3600);
        return FORSETTI_OK;
      }
      """)

  /// A hostile consumer of the hung provider, calling it from four threads, so the provider is hung
  /// while the healthy module does not consume it (its count: calls returned, by timeout).
  static let hungCaller = hostile(
    "com.bench.caller", threads: 4, globals: "static const forsetti_role_service *roles;\n",
    setup: """
      roles = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      if (!roles) return FORSETTI_ERR_START_FAILED;
      """,
    prepare: "char out[16]; size_t n;", op: "roles->call(\"get\", \"x\", 1, out, sizeof out, &n);")

  static let provides = #","defaultModuleRole":"shared_database""#
  static let consumes =
    #","manifestTemplateVersion":"1.1","runtimeRequirements":{"io":[],"dataIsolation":{"mode":"framework_mediated_shared"}}"#
}
