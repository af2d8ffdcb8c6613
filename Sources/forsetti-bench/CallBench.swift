import ForsettiBridge
import ForsettiRuntime
import Foundation
import Glibc

/// Call costs measured from C, in one in-process module: a direct C call through a pointer, a
/// bare libffi closure, and a bound host function; plus event fan-out to 10 subscribers.
enum CallBench {
  static let probe = """
    #include <time.h>
    static const forsetti_events *g_events;
    static int g_delivered;
    __attribute__((noinline)) static int32_t nothing(int64_t v) { return (int32_t)v; }
    static void on_fan(void *c, const char *s, const char *t, const void *p, size_t n) { (void)c; (void)s; (void)t; (void)p; (void)n; g_delivered++; }
    typedef void (*handler_fn)(void *, const char *, const char *, const void *, size_t);
    static handler_fn volatile g_handlers[10];
    static double elapsed(struct timespec a, struct timespec b) { return (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec); }
    /* Every loop passes the same argument: a token this module held and gave back, so the
       bound unsubscribe does the whole check (is it this module's live subscription?). */
    static volatile int64_t g_stale;
    double bench_loop(int32_t (*volatile fn)(int64_t), long n) {
      struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
      for (long i = 0; i < n; i++) fn(g_stale);
      clock_gettime(CLOCK_MONOTONIC, &b); return elapsed(a, b) / n;
    }
    double bench_direct(long n) { return bench_loop(nothing, n); }
    double bench_bound(long n) { return bench_loop(g_events->unsubscribe, n); }
    double bench_fan(long n) {
      struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
      for (long i = 0; i < n; i++) g_events->publish("bench.fan", "x", 1);
      clock_gettime(CLOCK_MONOTONIC, &b); return elapsed(a, b) / n;
    }
    double bench_fan_direct(long n) {
      struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
      for (long i = 0; i < n; i++) for (int k = 0; k < 10; k++) g_handlers[k](NULL, "com.bench.probe", "bench.fan", "x", 1);
      clock_gettime(CLOCK_MONOTONIC, &b); return elapsed(a, b) / n;
    }
    int bench_delivered(void) { return g_delivered; }
    """

  static let start = """
    g_events = host->resolve(FORSETTI_SERVICE_EVENTS);
    g_stale = g_events->subscribe("bench.stale", on_fan, NULL);
    if (g_stale <= 0 || g_events->unsubscribe(g_stale) != FORSETTI_OK) return FORSETTI_ERR_START_FAILED;
    for (int k = 0; k < 10; k++) { g_events->subscribe("bench.fan", on_fan, NULL); g_handlers[k] = on_fan; }
    return FORSETTI_OK;
    """

  typealias PerCall = @convention(c) (Int) -> Double
  typealias Loop = @convention(c) (UnsafeRawPointer?, Int) -> Double

  static func function<T>(_ library: String, _ symbol: String, as: T.Type) -> T? {
    guard let h = dlopen(library, RTLD_NOW | RTLD_NOLOAD), let f = dlsym(h, symbol) else { return nil }
    return unsafeBitCast(f, to: T.self)
  }
}
