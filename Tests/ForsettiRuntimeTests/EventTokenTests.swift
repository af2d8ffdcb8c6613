import CForsetti
import ForsettiCore
import ForsettiRuntime
import ForsettiTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

/// Subscription tokens as modules use them: a module ends only its own subscriptions, each
/// exactly once even when its threads race for it, deliveries keep their order, and nothing a
/// module does after its stop reaches the bus.
@Suite(.onTestThreads) struct EventTokenTests {
  typealias TokenFunction = @convention(c) (Int32) -> Int64
  typealias EndFunction = @convention(c) (Int64) -> Int32

  static func function<T>(_ library: String, _ symbol: String, as: T.Type) -> T? {
    guard let h = dlopen(library, RTLD_NOW | RTLD_NOLOAD), let f = dlsym(h, symbol) else { return nil }
    return unsafeBitCast(f, to: T.self)
  }

  /// A module that subscribes on request and remembers, in order, which handler saw an event.
  static func subscriber(_ id: String, _ entry: String) -> ModuleFixture {
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.prelude = """
      static const forsetti_events *g_events;
      static int g_seen[64], g_count;
      static void on_event(void *c, const char *s, const char *t, const void *p, size_t n) {
        (void)s; (void)t; (void)p; (void)n;
        if (g_count < 64) g_seen[g_count++] = (int)(long)c;
      }
      long long \(entry)_subscribe(int tag) { return g_events->subscribe("tok.ping", on_event, (void *)(long)tag); }
      int \(entry)_unsubscribe(long long token) { return g_events->unsubscribe(token); }
      int \(entry)_publish(void) { g_count = 0; return g_events->publish("tok.ping", "", 0); }
      int \(entry)_seen(int i) { return i < g_count ? g_seen[i] : -1; }
      int \(entry)_count(void) { return g_count; }
      """
    f.start = """
      g_events = host->resolve(FORSETTI_SERVICE_EVENTS);
      return g_events ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    return f
  }

  @Test func aModuleEndsOnlyItsOwnSubscriptionsAndEachOnce() throws {
    let h = RuntimeHarness()
    let a = try Self.subscriber("com.test.tokena", "toka").install(in: h.dir)
    let b = try Self.subscriber("com.test.tokenb", "tokb").install(in: h.dir)
    let m = try h.start()
    let subscribeA = try #require(Self.function(a, "toka_subscribe", as: TokenFunction.self))
    let endA = try #require(Self.function(a, "toka_unsubscribe", as: EndFunction.self))
    let subscribeB = try #require(Self.function(b, "tokb_subscribe", as: TokenFunction.self))
    let endB = try #require(Self.function(b, "tokb_unsubscribe", as: EndFunction.self))
    let tokenA = subscribeA(1)
    let tokenB = subscribeB(2)
    #expect(tokenA > 0)
    #expect(tokenB > 0)
    #expect(tokenA != tokenB)

    // Another module's token, forged neighbours of it, and absurd values end nothing.
    // (B's own token may be a neighbour of A's: it is left out.)
    let forgeries = [tokenA, tokenA + 1, tokenA - 1, tokenA + 256, tokenA - 256, 0, -1, Int64.min, Int64.max]
    for forged in forgeries where forged != tokenB {
      #expect(endB(forged) == FORSETTI_ERR_NOT_FOUND, "token \(forged)")
    }
    #expect(m.environment.events.subscriptionCount(moduleID: "com.test.tokena") == 1)
    #expect(endA(tokenB) == FORSETTI_ERR_NOT_FOUND)
    #expect(m.environment.events.subscriptionCount(moduleID: "com.test.tokenb") == 1)

    // The owner ends it once; the same token is stale afterwards, for the owner too.
    #expect(endA(tokenA) == FORSETTI_OK)
    #expect(endA(tokenA) == FORSETTI_ERR_NOT_FOUND)
    #expect(m.environment.events.subscriptionCount(moduleID: "com.test.tokena") == 0)

    // A new subscription that reuses the freed place gets a new token; the old one stays dead.
    let again = subscribeA(3)
    #expect(again > 0)
    #expect(again != tokenA)
    #expect(endA(tokenA) == FORSETTI_ERR_NOT_FOUND)
    #expect(endA(again) == FORSETTI_OK)
    #expect(endB(tokenB) == FORSETTI_OK)
    m.stopAll()
  }

  @Test func theLimitIsPerModuleAndFreedByUnsubscribing() throws {
    let h = RuntimeHarness()
    let a = try Self.subscriber("com.test.toklimit", "tokl").install(in: h.dir)
    let m = try h.start()
    let subscribe = try #require(Self.function(a, "tokl_subscribe", as: TokenFunction.self))
    let end = try #require(Self.function(a, "tokl_unsubscribe", as: EndFunction.self))
    let tokens = (0..<EventBus.maxSubscriptionsPerModule).map { _ in subscribe(0) }
    #expect(tokens.allSatisfy { $0 > 0 })
    #expect(Set(tokens).count == tokens.count)
    #expect(subscribe(0) == Int64(FORSETTI_ERR_TOO_LARGE))
    #expect(end(tokens[100]) == FORSETTI_OK)
    let replacement = subscribe(0)
    #expect(replacement > 0)
    #expect(!tokens.contains(replacement))
    #expect(subscribe(0) == Int64(FORSETTI_ERR_TOO_LARGE))
    #expect(m.environment.events.subscriptionCount(moduleID: "com.test.toklimit") == 256)
    m.stopAll()
    #expect(m.environment.events.subscriptionCount(moduleID: "com.test.toklimit") == 0)
  }

  @Test func deliveriesFollowSubscriptionOrderAcrossUnsubscribes() throws {
    let h = RuntimeHarness()
    let a = try Self.subscriber("com.test.tokorder", "toko").install(in: h.dir)
    let m = try h.start()
    let subscribe = try #require(Self.function(a, "toko_subscribe", as: TokenFunction.self))
    let end = try #require(Self.function(a, "toko_unsubscribe", as: EndFunction.self))
    let publish = try #require(Self.function(a, "toko_publish", as: (@convention(c) () -> Int32).self))
    let seen = try #require(Self.function(a, "toko_seen", as: (@convention(c) (Int32) -> Int32).self))
    let tokens = (1...4).map { subscribe(Int32($0)) }
    #expect(publish() == FORSETTI_OK)
    #expect((0..<5).map { seen($0) } == [1, 2, 3, 4, -1])
    #expect(end(tokens[1]) == FORSETTI_OK)
    // Takes the place the second one left, but is delivered last: order is subscription order.
    _ = subscribe(5)
    #expect(publish() == FORSETTI_OK)
    #expect((0..<5).map { seen($0) } == [1, 3, 4, 5, -1])
    m.stopAll()
  }

  /// Subscriptions of two modules, interleaved: each event reaches them in the order they
  /// subscribed, whatever module each belongs to (every handler logs, and the log keeps order).
  @Test func deliveriesFollowSubscriptionOrderAcrossModules() throws {
    let h = RuntimeHarness()
    func logger(_ id: String, _ entry: String) -> ModuleFixture {
      var f = ModuleFixture(moduleID: id, entryPoint: entry)
      f.prelude = """
        static const forsetti_events *g_events;
        static void on_event(void *c, const char *s, const char *t, const void *p, size_t n) {
          (void)s; (void)t; (void)p; (void)n;
          char line[32]; snprintf(line, sizeof line, "delivery %d", (int)(long)c); fixture_log(line);
        }
        long long \(entry)_subscribe(int tag) { return g_events->subscribe("tok.mixed", on_event, (void *)(long)tag); }
        int \(entry)_publish(void) { return g_events->publish("tok.mixed", "", 0); }
        """
      f.start = "g_events = host->resolve(FORSETTI_SERVICE_EVENTS); return FORSETTI_OK;"
      return f
    }
    let a = try logger("com.test.tokmixa", "tokma").install(in: h.dir)
    let b = try logger("com.test.tokmixb", "tokmb").install(in: h.dir)
    let m = try h.start()
    let subscribeA = try #require(Self.function(a, "tokma_subscribe", as: TokenFunction.self))
    let subscribeB = try #require(Self.function(b, "tokmb_subscribe", as: TokenFunction.self))
    for (tag, module) in [(1, "a"), (2, "a"), (3, "b"), (4, "a"), (5, "b"), (6, "b")] {
      #expect((module == "a" ? subscribeA : subscribeB)(Int32(tag)) > 0)
    }
    #expect(h.call(b, "tokmb_publish") == FORSETTI_OK)
    let order = h.log.all.filter { $0.message.hasPrefix("delivery ") }.map {
      "\($0.moduleID ?? "host") \($0.message)"
    }
    #expect(
      order == [
        "com.test.tokmixa delivery 1", "com.test.tokmixa delivery 2", "com.test.tokmixb delivery 3",
        "com.test.tokmixa delivery 4", "com.test.tokmixb delivery 5", "com.test.tokmixb delivery 6",
      ])
    m.stopAll()
  }

  /// Eight threads of one module subscribe, then all race to end every token: each token ends
  /// exactly once, whichever thread gets it, while another module publishes throughout.
  @Test func threadsOfAModuleRacingOverTokensEndEachExactlyOnce() throws {
    let h = RuntimeHarness()
    var f = ModuleFixture(moduleID: "com.test.tokrace", entryPoint: "tokrace_entry")
    f.prelude = """
      #include <pthread.h>
      #include <stdatomic.h>
      #define THREADS 8
      #define EACH 30
      static const forsetti_events *g_events;
      static long long g_tokens[THREADS * EACH];
      static atomic_int g_ended, g_refused, g_bad, g_delivered;
      static pthread_barrier_t g_barrier;
      static void on_event(void *c, const char *s, const char *t, const void *p, size_t n) {
        (void)c; (void)s; (void)t; (void)p; (void)n; atomic_fetch_add(&g_delivered, 1);
      }
      static void *worker(void *arg) {
        int k = (int)(long)arg;
        for (int i = 0; i < EACH; i++) {
          long long t = g_events->subscribe("tok.race", on_event, NULL);
          if (t <= 0) atomic_fetch_add(&g_bad, 1);
          g_tokens[k * EACH + i] = t;
          g_events->publish("tok.race", "", 0);
        }
        pthread_barrier_wait(&g_barrier);
        /* Every thread tries every token, starting at a different place. */
        for (int i = 0; i < THREADS * EACH; i++) {
          int r = g_events->unsubscribe(g_tokens[(i + k * EACH) % (THREADS * EACH)]);
          if (r == FORSETTI_OK) atomic_fetch_add(&g_ended, 1);
          else if (r == FORSETTI_ERR_NOT_FOUND) atomic_fetch_add(&g_refused, 1);
          else atomic_fetch_add(&g_bad, 1);
        }
        return NULL;
      }
      int tokrace_run(void) {
        pthread_t t[THREADS];
        pthread_barrier_init(&g_barrier, NULL, THREADS);
        for (long k = 0; k < THREADS; k++) pthread_create(&t[k], NULL, worker, (void *)k);
        for (int k = 0; k < THREADS; k++) pthread_join(t[k], NULL);
        pthread_barrier_destroy(&g_barrier);
        return 0;
      }
      int tokrace_ended(void) { return atomic_load(&g_ended); }
      int tokrace_refused(void) { return atomic_load(&g_refused); }
      int tokrace_bad(void) { return atomic_load(&g_bad); }
      int tokrace_delivered(void) { return atomic_load(&g_delivered); }
      """
    f.start = """
      g_events = host->resolve(FORSETTI_SERVICE_EVENTS);
      return g_events ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    let so = try f.install(in: h.dir, ccFlags: ["-pthread"])
    var p = ModuleFixture(moduleID: "com.test.tokpublisher", entryPoint: "tokpub_entry")
    p.prelude = """
      static const forsetti_events *g_events;
      int tokpub_publish(void) { return g_events->publish("tok.race", "x", 1); }
      """
    p.start = "g_events = host->resolve(FORSETTI_SERVICE_EVENTS); return FORSETTI_OK;"
    let pso = try p.install(in: h.dir)
    let m = try h.start()
    let publish = try #require(Self.function(pso, "tokpub_publish", as: (@convention(c) () -> Int32).self))
    let running = Running()
    let publisher = Thread {
      while running.flag.load(ordering: .relaxed) { _ = publish() }
      running.done.signal()
    }
    publisher.start()
    #expect(h.call(so, "tokrace_run") == 0)
    running.flag.store(false, ordering: .relaxed)
    running.done.wait()
    let threads = 8
    let each = 30
    #expect(h.call(so, "tokrace_bad") == 0)
    #expect(h.call(so, "tokrace_ended") == Int32(threads * each))
    #expect(h.call(so, "tokrace_refused") == Int32(threads * each * (threads - 1)))
    #expect((h.call(so, "tokrace_delivered") ?? 0) > 0)
    #expect(m.environment.events.subscriptionCount(moduleID: "com.test.tokrace") == 0)
    m.stopAll()
  }

  /// A module thread that keeps subscribing and unsubscribing while the host stops the module:
  /// once `stop` has run, every call answers REVOKED and no subscription is left on the bus.
  @Test func stoppingDuringCallsLeavesNoSubscriptionBehind() throws {
    let h = RuntimeHarness()
    var f = ModuleFixture(moduleID: "com.test.tokchurn", entryPoint: "tokchurn_entry")
    f.prelude = """
      #include <pthread.h>
      #include <stdatomic.h>
      static const forsetti_events *g_events;
      static atomic_int g_running, g_calls, g_revoked;
      static pthread_t g_thread;
      static void on_event(void *c, const char *s, const char *t, const void *p, size_t n) {
        (void)c; (void)s; (void)t; (void)p; (void)n;
      }
      static void *churn(void *arg) {
        (void)arg;
        while (atomic_load(&g_running)) {
          long long t = g_events->subscribe("tok.churn", on_event, NULL);
          int r = g_events->unsubscribe(t > 0 ? t : 1);
          g_events->subscribe("tok.churn", on_event, NULL);
          if (t == FORSETTI_ERR_REVOKED && r == FORSETTI_ERR_REVOKED) atomic_fetch_add(&g_revoked, 1);
          atomic_fetch_add(&g_calls, 1);
        }
        return NULL;
      }
      int tokchurn_calls(void) { return atomic_load(&g_calls); }
      int tokchurn_revoked(void) { return atomic_load(&g_revoked); }
      int tokchurn_end(void) { atomic_store(&g_running, 0); pthread_join(g_thread, NULL); return 0; }
      """
    f.start = """
      g_events = host->resolve(FORSETTI_SERVICE_EVENTS);
      atomic_store(&g_running, 1);
      return pthread_create(&g_thread, NULL, churn, NULL) == 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    let so = try f.install(in: h.dir, ccFlags: ["-pthread"])
    let m = try h.start()
    #expect(h.state("com.test.tokchurn") == .started)
    // Let it churn long enough to be mid-call when the stop comes.
    var waited = 0
    while (h.call(so, "tokchurn_calls") ?? 0) < 1000 && waited < 30000 {
      usleep(1000)
      waited += 1
    }
    m.stopAll()
    // The thread goes on calling after stop: its calls are refused, and none leaves a trace.
    let before = h.call(so, "tokchurn_revoked") ?? 0
    waited = 0
    while (h.call(so, "tokchurn_revoked") ?? 0) < before + 100 && waited < 30000 {
      usleep(1000)
      waited += 1
    }
    #expect((h.call(so, "tokchurn_revoked") ?? 0) >= before + 100)
    #expect(m.environment.events.subscriptionCount(moduleID: "com.test.tokchurn") == 0)
    #expect(h.call(so, "tokchurn_end") == 0)
    #expect(m.environment.events.subscriptionCount(moduleID: "com.test.tokchurn") == 0)
  }
}

/// Tells a helper thread to stop, and waits until it has.
private final class Running: Sendable {
  let flag = Atomic(true)
  let done = DispatchSemaphore(value: 0)
}
