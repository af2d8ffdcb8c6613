import CForsetti
import ForsettiBridge
import ForsettiCore
import ForsettiTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

@testable import ForsettiRuntime

/// The red team of ABI 1.1 (issue 17): hostile modules against the host services and the role
/// services, each a real `.so` run by a real `ModuleManager`, isolated (the default of a real
/// host) and, where it means something, in-process. A module in the host's process can do
/// anything the host can, so in-process runs check the semantics, not containment.
@Suite(.onTestThreads) struct ServicesRedTeamTests {
  static let provider = "com.test.redteam.db"
  static let consumer = "com.test.redteam.app"
  static let other = "com.test.redteam.other"
  static let bystander = "com.test.redteam.bystander"
  static let consumes = Placement.consumesSharedDatabase

  typealias Mode = Placement

  // MARK: - Fixtures

  /// C that finds the ring a call came on — the newest role channel mapped in this worker
  /// (found in /proc/self/maps, or, confined without /proc, by reading the address space near
  /// fd 4's mapping page by page, through a pipe so an unmapped page costs EFAULT rather than a
  /// crash, for a channel whose pending request names `method`), else the serve ring (fd 4
  /// mapped a second time, found by its size) — and writes answers into it by hand, as a hostile
  /// provider can: the layout is
  /// CallRing's (a 64-byte header of 32-bit words, then the request slot and the response slot
  /// of 128 KiB each).
  static let ringAccess = """
    #include <stdint.h>
    #include <limits.h>
    #include <sys/mman.h>
    #include <sys/stat.h>
    #include <sys/syscall.h>
    #include <linux/futex.h>
    #include <time.h>
    #define RT_FRAME (128u * 1024u)
    #define RT_RING (64u + 2u * RT_FRAME)
    enum { RT_REQ_SEQ, RT_RESP_SEQ, RT_SERVER_ASLEEP, RT_CLIENT_ASLEEP, RT_REQ_LEN, RT_RESP_LEN, RT_CLOSED };
    static unsigned char *rt_serve;
    static unsigned char *rt_serve_ring;
    static unsigned char *rt_channel(void) {
      FILE *maps = fopen("/proc/self/maps", "r");
      if (!maps) return NULL;
      char line[512]; unsigned long start = 0, found = 0;
      while (fgets(line, sizeof line, maps)) {
        if (strstr(line, "forsetti-role-channel") && sscanf(line, "%lx-", &start) == 1) found = start;
      }
      fclose(maps);
      /* Its first lane, after the channel's header page. */
      return found ? (unsigned char *)found + 4096 : NULL;
    }
    /* Whether the page at `p` starts a channel whose pending request is a serveCall of
     * `method` (kind 8, id, room, an empty caller, the method). */
    static int rt_is_channel(int pfd[2], unsigned char *p, const char *method) {
      unsigned char b[64]; size_t m = strlen(method);
      if (m > 30 || write(pfd[1], p + 64, sizeof b) != (ssize_t)sizeof b) return 0;
      if (read(pfd[0], b, sizeof b) != (ssize_t)sizeof b) return 0;
      uint32_t kind, caller, len; memcpy(&kind, b, 4); memcpy(&caller, b + 22, 4); memcpy(&len, b + 27, 4);
      return kind == 8 && b[12] == 1 && b[21] == 2 && caller == 0 && b[26] == 2 && len == m
        && memcmp(b + 31, method, m) == 0;
    }
    static unsigned char *rt_scan(const char *method) {
      int pfd[2];
      if (!rt_serve_ring || pipe(pfd) != 0) return NULL;
      uintptr_t page = 4096, base = ((uintptr_t)rt_serve_ring - RT_RING) & ~(page - 1);
      unsigned char *found = NULL;
      for (uintptr_t d = page; !found && d < ((uintptr_t)1 << 31); d += page) {
        if (rt_is_channel(pfd, (unsigned char *)(base + d), method)) found = (unsigned char *)(base + d);
        else if (d < base && rt_is_channel(pfd, (unsigned char *)(base - d), method)) found = (unsigned char *)(base - d);
      }
      close(pfd[0]); close(pfd[1]);
      return found;
    }
    static unsigned char *rt_map_method(const char *method) {
      unsigned char *channel = rt_channel();
      if (channel) return rt_serve = channel;
      for (int fd = 3; !rt_serve_ring && fd < 256; fd++) {
        struct stat st;
        if (fstat(fd, &st) != 0 || st.st_size != (off_t)\(CallRing.mappingSize)) continue;
        void *p = mmap(NULL, \(CallRing.mappingSize), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) continue;
        rt_serve_ring = (unsigned char *)p + RT_RING;
      }
      if (method && (channel = rt_scan(method))) return rt_serve = channel;
      return rt_serve = rt_serve_ring;
    }
    static unsigned char *rt_map(void) { return rt_map_method(NULL); }
    static uint32_t *rt_word(int i) { return (uint32_t *)rt_serve + i; }
    static uint64_t rt_request_id(void) { uint64_t id; memcpy(&id, rt_serve + 64 + 4, 8); return id; }
    static size_t rt_int(unsigned char *p, int64_t v) { p[0] = 1; memcpy(p + 1, &v, 8); return 9; }
    static size_t rt_bytes(unsigned char *p, const void *b, uint32_t n) {
      p[0] = 2; memcpy(p + 1, &n, 4); if (n) memcpy(p + 5, b, n); return 5 + (size_t)n;
    }
    /* Answers the request in the slot now with a frame of our making, `slot_length` overriding
     * the length word when not 0. */
    static void rt_answer(uint32_t kind, uint64_t id, int64_t status, int64_t claimed, const void *bytes,
                          uint32_t n, uint32_t slot_length) {
      unsigned char *slot = rt_serve + 64 + RT_FRAME;
      memcpy(slot, &kind, 4); memcpy(slot + 4, &id, 8);
      size_t at = 12;
      at += rt_int(slot + at, status);
      at += rt_int(slot + at, claimed);
      at += rt_bytes(slot + at, bytes, n);
      __atomic_store_n(rt_word(RT_RESP_LEN), slot_length ? slot_length : (uint32_t)at, __ATOMIC_RELEASE);
      __atomic_store_n(rt_word(RT_RESP_SEQ), __atomic_load_n(rt_word(RT_REQ_SEQ), __ATOMIC_ACQUIRE),
                       __ATOMIC_SEQ_CST);
      syscall(SYS_futex, rt_word(RT_RESP_SEQ), FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    }
    static double rt_now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
    """

  /// A provider of `shared_database` whose handler does what the method says: `echo`, `big`
  /// (5000 bytes), `hang` (never returns), `crash`, `huge-need` (asks for an absurd buffer), and
  /// in a worker the `forge-*` answers written straight into the ring the call came on, and
  /// `spin`, which keeps changing the ring's response word for `spinSeconds` without ever
  /// answering.
  static func hostileProvider(id: String = provider, entry: String = "rt_db_entry", spinSeconds: Int = 13)
    -> ModuleFixture
  {
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.prelude =
      ringAccess + """
        static const char *g_sandbox = "";
        static forsetti_status handle(void *ctx, const char *caller, const char *method, const void *req,
                                      size_t len, void *resp, size_t cap, size_t *rlen) {
          (void)ctx;
          if (strcmp(method, "crash") == 0) abort();
          if (strcmp(method, "hang") == 0) { fixture_log("hanging"); for (;;) sleep(1000); }
          if (strcmp(method, "big") == 0) {
            *rlen = 5000;
            if (cap < 5000) return FORSETTI_ERR_BUFFER_TOO_SMALL;
            memset(resp, 'x', 5000);
            return FORSETTI_OK;
          }
          if (strcmp(method, "huge-need") == 0) { *rlen = (size_t)1 << 62; return FORSETTI_ERR_BUFFER_TOO_SMALL; }
          if (strncmp(method, "forge-", 6) == 0 || strcmp(method, "spin") == 0) {
            if (!rt_map_method(method)) { *rlen = 0; return FORSETTI_ERR_IO; }
            uint64_t id = rt_request_id();
            char junk[300]; memset(junk, 'J', sizeof junk);
            if (strcmp(method, "forge-length") == 0) rt_answer(5, id, FORSETTI_OK, (int64_t)1 << 40, NULL, 0, 0);
            else if (strcmp(method, "forge-id") == 0) rt_answer(5, id + 1, FORSETTI_OK, 2, "ok", 2, 0);
            else if (strcmp(method, "forge-big") == 0) rt_answer(5, id, FORSETTI_OK, 300, junk, 300, 0);
            else if (strcmp(method, "forge-kind") == 0) rt_answer(8, id, FORSETTI_OK, 2, "ok", 2, 0);
            else if (strcmp(method, "forge-ringlen") == 0) rt_answer(5, id, FORSETTI_OK, 2, "ok", 2, 0xFFFFFFFFu);
            else if (strcmp(method, "forge-garbage") == 0) {
              memset(rt_serve + 64 + RT_FRAME, 0xFF, 100);
              __atomic_store_n(rt_word(RT_RESP_LEN), 100, __ATOMIC_RELEASE);
              __atomic_store_n(rt_word(RT_RESP_SEQ), __atomic_load_n(rt_word(RT_REQ_SEQ), __ATOMIC_ACQUIRE), __ATOMIC_SEQ_CST);
              syscall(SYS_futex, rt_word(RT_RESP_SEQ), FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
            } else if (strcmp(method, "spin") == 0) {
              /* Never the awaited sequence number, but never the same word twice running. */
              uint32_t seq = __atomic_load_n(rt_word(RT_REQ_SEQ), __ATOMIC_ACQUIRE);
              double end = rt_now() + \(spinSeconds);
              for (uint32_t i = 0; rt_now() < end; i++) {
                for (int k = 0; k < 1000; k++) __atomic_store_n(rt_word(RT_RESP_SEQ), seq + 2 + ((i * 1000u + k) & 0xFFFFF), __ATOMIC_SEQ_CST);
              }
              __atomic_store_n(rt_word(RT_RESP_SEQ), seq - 1, __ATOMIC_SEQ_CST);
              *rlen = 4; memcpy(resp, "late", 4);
              return FORSETTI_OK;
            }
            /* The real answer only once the test saw the consumer take the forged one (it creates
             * SANDBOX/taken-METHOD): a fixed sleep could end first on a loaded machine. */
            char cue[700]; snprintf(cue, sizeof cue, "%s/taken-%s", g_sandbox, method);
            for (int i = 0; i < 12000 && access(cue, F_OK) != 0; i++) usleep(10000);
            *rlen = 0;
            return FORSETTI_OK;
          }
          int n = snprintf(resp, cap, "%s|%s|%.*s", caller, method, (int)len, (const char *)req);
          if (n < 0) return FORSETTI_ERR_IO;
          *rlen = (size_t)n;
          return (size_t)n >= cap ? FORSETTI_ERR_BUFFER_TOO_SMALL : FORSETTI_OK;
        }
        """
    f.start = """
      const forsetti_role_service *r = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      if (!r) { fixture_log("provider: no role service"); return FORSETTI_ERR_START_FAILED; }
      g_sandbox = strdup(host->sandbox_path);
      return r->serve(handle, NULL) == FORSETTI_OK ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    return f
  }

  /// Tells the provider a consumer has taken its forged answer to `method` (seen in `consumer`'s
  /// log), so it may write the real one, once that line is there; false if it never came.
  static func releaseForgery(_ h: RuntimeHarness, _ method: String, seenBy consumer: String) -> Bool {
    guard h.waitForLine(consumer, timeout: 60, { $0.hasPrefix(method + " -> ") }) != nil else { return false }
    return FileManager.default.createFile(
      atPath: h.dir.url("state/sandboxes/\(provider)/taken-\(method)"), contents: nil)
  }

  static func installProvider(_ h: RuntimeHarness, _ f: ModuleFixture = hostileProvider()) throws {
    try f.install(
      in: h.dir, capabilities: ["shared_database"], manifestExtra: #","defaultModuleRole":"shared_database""#)
  }

  /// A consumer whose thread runs `body` (C statements; `db` is the role service, `call(method)`
  /// calls it with a 256-byte buffer guarded by a canary and logs `METHOD -> STATUS len=N`;
  /// `cue(name)` waits up to 120 s for the test to create SANDBOX/name).
  static func consumerFixture(id: String = consumer, entry: String = "rt_app_entry", body: String)
    -> ModuleFixture
  {
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.prelude = """
      #include <pthread.h>
      #include <stdint.h>
      static const forsetti_role_service *db;
      static pthread_t g_thread;
      static volatile int g_run = 1;
      static const char *g_sandbox;
      __attribute__((unused)) static int cue(const char *name) {
        char p[700]; snprintf(p, sizeof p, "%s/%s", g_sandbox, name);
        for (int i = 0; i < 12000 && g_run; i++) { if (access(p, F_OK) == 0) return 1; usleep(10000); }
        return 0;
      }
      static void say(const char *fmt, long a, long b) { char l[300]; snprintf(l, sizeof l, fmt, a, b); fixture_log(l); }
      static forsetti_status call(const char *method) {
        unsigned char out[256 + 64]; memset(out + 256, 0xA5, 64);
        size_t n = 12345;
        forsetti_status s = db->call(method, "hi", 2, out, 256, &n);
        int canary = 1; for (int i = 256; i < 256 + 64; i++) if (out[i] != 0xA5) canary = 0;
        char l[400];
        snprintf(l, sizeof l, "%s -> %d len=%zu canary=%s", method, s, n, canary ? "ok" : "BROKEN");
        fixture_log(l);
        return s;
      }
      static void *loop(void *arg) { (void)arg; \(body) return NULL; }
      """
    f.start = """
      db = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      if (!db) { fixture_log("consumer: no role service"); return FORSETTI_OK; }
      g_sandbox = strdup(host->sandbox_path);
      return pthread_create(&g_thread, NULL, loop, NULL) == 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    f.stop = "g_run = 0;"
    return f
  }

  static func installConsumer(_ h: RuntimeHarness, _ f: ModuleFixture) throws {
    try f.install(in: h.dir, capabilities: ["shared_database"], manifestExtra: consumes)
  }

  /// A module with nothing to do with the roles that calls a host service (crypto random bytes)
  /// every 50 ms and says so every 20 successes: the host serving others while a role is abused.
  static func bystanderFixture() -> ModuleFixture {
    var f = ModuleFixture(moduleID: bystander, entryPoint: "rt_bystander_entry")
    f.prelude = """
      #include <pthread.h>
      static const forsetti_crypto *cr;
      static volatile int g_run = 1;
      static pthread_t g_thread;
      static void *loop(void *arg) {
        (void)arg;
        unsigned char b[32]; int ok = 0, bad = 0;
        for (int i = 0; g_run && i < 1200; i++) {
          if (cr->random_bytes(b, sizeof b) == FORSETTI_OK) ok++; else bad++;
          if (ok > 0 && ok % 20 == 0) { char l[64]; snprintf(l, sizeof l, "bystander ok=%d bad=%d", ok, bad); fixture_log(l); ok++; }
          usleep(50000);
        }
        return NULL;
      }
      """
    f.start = """
      cr = host->resolve(FORSETTI_SERVICE_CRYPTO);
      if (!cr) { fixture_log("bystander: no crypto"); return FORSETTI_OK; }
      return pthread_create(&g_thread, NULL, loop, NULL) == 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    f.stop = "g_run = 0; pthread_join(g_thread, NULL);"
    return f
  }

  static func bystanderCount(_ h: RuntimeHarness) -> Int {
    h.lines(bystander).filter { $0.hasPrefix("bystander ok=") }.count
  }

  /// The status in a `METHOD -> STATUS len=N canary=…` line.
  static func status(_ line: String?) -> Int32? {
    guard let line, let arrow = line.range(of: " -> ") else { return nil }
    return Int32(line[arrow.upperBound...].prefix { $0 == "-" || $0.isNumber })
  }

  // MARK: - 1. A provider that never answers

  /// The hung provider's caller gets FORSETTI_ERR_TIMEOUT (one 10 s wait), a second consumer
  /// too rather than a hang, the bystander keeps being served all along, and the host stops.
  @Test(.timeLimit(.minutes(5))) func aProviderThatNeverAnswersTimesOutAndTheHostStaysResponsive() throws {
    let h = RuntimeHarness()
    try Self.installProvider(h)
    try Self.installConsumer(h, Self.consumerFixture(body: #"call("hang");"#))
    try Self.installConsumer(
      h,
      Self.consumerFixture(id: Self.other, entry: "rt_other_entry", body: #"if (cue("go")) call("echo");"#))
    try Self.bystanderFixture().install(in: h.dir, capabilities: ["crypto_utilities"])
    let m = try h.start(mode: Mode.isolated.execution)
    #expect(m.records.allSatisfy { $0.state == .started }, "\(m.records.map { ($0.moduleID, $0.state) })")
    let before = Self.bystanderCount(h)
    // The other consumer calls once the provider is seen stuck in the hung call (a cue file,
    // where a fixed sleep could end before the hang began on a loaded machine).
    #expect(h.waitForLine(Self.provider) { $0 == "hanging" } != nil, "\(h.lines(Self.provider))")
    #expect(
      FileManager.default.createFile(atPath: h.dir.url("state/sandboxes/\(Self.other)/go"), contents: nil))
    let hang = h.waitForLine(Self.consumer, timeout: 60) { $0.hasPrefix("hang -> ") }
    #expect(Self.status(hang) == FORSETTI_ERR_TIMEOUT, "\(h.lines(Self.consumer))")
    // The other consumer waited its turn behind the hung call, then was told: never a hang.
    let echo = h.waitForLine(Self.other, timeout: 60) { $0.hasPrefix("echo -> ") }
    #expect(
      [FORSETTI_ERR_TIMEOUT, FORSETTI_ERR_UNAVAILABLE].contains(Self.status(echo)), "\(h.lines(Self.other))")
    // While the role was stuck, another module's host calls went on being answered.
    #expect(Self.bystanderCount(h) > before + 2, "\(h.lines(Self.bystander))")
    #expect(!h.lines(Self.bystander).contains { $0.contains("bad=") && !$0.hasSuffix("bad=0") })
    // The consumer blocked in the role call, and the provider stuck in its handler, still stop.
    m.stopAll()
    #expect(m.records.allSatisfy { $0.state != .started }, "\(m.records.map { ($0.moduleID, $0.state) })")
  }

  // MARK: - 2. A provider writing its own answers into the ring

  /// Answers with another request's ID, another kind, more bytes than the caller has room for,
  /// an absurd length word or garbage: the caller gets an error, its buffer is not overrun, the
  /// host lives on, and the next honest answer arrives.
  @Test(.timeLimit(.minutes(5))) func forgedChannelAnswersAreRefused() throws {
    let h = RuntimeHarness()
    try Self.installProvider(h)
    // Every call goes on a channel of the consumer's own, which a confined provider finds by
    // reading its address space (no /proc); the consumer reads the answer with
    // ServiceReply.check.
    let forgeries = ["forge-id", "forge-kind", "forge-big", "forge-garbage", "forge-ringlen"]
    for (n, method) in forgeries.enumerated() {
      try Self.installConsumer(
        h,
        Self.consumerFixture(
          id: "com.test.forger\(n)", entry: "rt_forger\(n)_entry",
          body: #"call("\#(method)"); fixture_log("forged done");"#))
    }
    try Self.installConsumer(
      h,
      Self.consumerFixture(
        body: """
          const char *m[] = { "echo", "huge-need", "echo" };
          for (int i = 0; i < 3; i++) { call(m[i]); usleep(100000); }
          fixture_log("forged done");
          """))
    let m = try h.start(mode: Mode.isolated.execution)
    defer { m.stopAll() }
    // Each forged answer released once its consumer has taken it, in whatever order they come.
    var released = Set<Int>()
    h.supervise(timeout: 60) {
      for (n, method) in forgeries.enumerated() where !released.contains(n) {
        if h.lines("com.test.forger\(n)").contains(where: { $0.hasPrefix(method + " -> ") }) {
          _ = Self.releaseForgery(h, method, seenBy: "com.test.forger\(n)")
          released.insert(n)
        }
      }
      return released.count == forgeries.count
    }
    var lines: [String] = []
    for (n, _) in forgeries.enumerated() {
      let id = "com.test.forger\(n)"
      #expect(h.waitForLine(id, timeout: 60) { $0 == "forged done" } != nil, "\(h.lines(id))")
      lines += h.lines(id)
    }
    #expect(
      h.waitForLine(Self.consumer, timeout: 60) { $0 == "forged done" } != nil, "\(h.lines(Self.consumer))")
    lines += h.lines(Self.consumer)
    func line(_ method: String) -> String? { lines.first { $0.hasPrefix(method + " -> ") } }
    for method in ["forge-id", "forge-kind", "forge-big", "forge-garbage"] {
      #expect(Self.status(line(method)) == FORSETTI_ERR_IO, "\(method): \(lines)")
    }
    // An absurd length word: not read, and the call ends at once, as a malformed answer.
    #expect(Self.status(line("forge-ringlen")) == FORSETTI_ERR_IO, "\(lines)")
    #expect(lines.filter { $0.contains(" -> ") }.allSatisfy { $0.hasSuffix("canary=ok") }, "\(lines)")
    #expect(line("echo") == "echo -> 0 len=28 canary=ok", "\(lines)")
    #expect(h.state(Self.provider) == .started)
    // (Between workers the answers never pass the host, so only the consumer sees them.)
  }

  /// Was a finding (fixed): a provider's answer of status OK with no bytes and a length word of 2^40 reaches
  /// the consumer as FORSETTI_OK with `*response_length` = 2^40 (its 256-byte buffer untouched):
  /// a consumer that trusts the length it was given reads far past its buffer. In-process the
  /// host never lets that happen (`RoleCall.run` takes the length from the bytes).
  @Test(.timeLimit(.minutes(5)))
  func aForgedLengthNeverReachesTheConsumerAsSuccess() throws {
    let h = RuntimeHarness()
    try Self.installProvider(h)
    try Self.installConsumer(
      h, Self.consumerFixture(body: #"call("forge-length"); fixture_log("forged done");"#))
    let m = try h.start(mode: Mode.isolated.execution)
    defer { m.stopAll() }
    #expect(Self.releaseForgery(h, "forge-length", seenBy: Self.consumer), "\(h.lines(Self.consumer))")
    let line = h.waitForLine(Self.consumer, timeout: 60) { $0.hasPrefix("forge-length -> ") }
    let status = Self.status(line)
    let length = line.flatMap { $0.split(separator: " ").first { $0.hasPrefix("len=") } }.map {
      $0.dropFirst(4)
    }
    #expect(status != nil, "\(h.lines(Self.consumer))")
    #expect(status != FORSETTI_OK || (length.flatMap { Int($0) } ?? .max) <= 256, "\(line ?? "no line")")
  }

  /// Was a finding (fixed): a provider that keeps changing its ring's response word (never to the
  /// awaited number) keeps the host's calling thread spinning past FORSETTI_ROLE_CALL_TIMEOUT_MS:
  /// `CallRing.wait` only looks at the deadline once the word stood still, and `CallRing.call`
  /// waits again after every change. The consumer is held for as long as the provider likes
  /// (13 s here, then it answers "late"), and the host burns a CPU meanwhile.
  @Test(.timeLimit(.minutes(5)))
  func aProviderChurningItsRingWordStillTimesOut() throws {
    let h = RuntimeHarness()
    try Self.installProvider(h)
    try Self.installConsumer(h, Self.consumerFixture(body: #"call("spin");"#))
    let m = try h.start(mode: Mode.isolated.execution)
    defer { m.stopAll() }
    let line = h.waitForLine(Self.consumer, timeout: 30) { $0.hasPrefix("spin -> ") }
    #expect(Self.status(line) == FORSETTI_ERR_TIMEOUT, "\(line ?? "no line")")
  }

  // MARK: - 3. A consumer flooding from many threads

  /// Sixteen threads of one consumer call as fast as they can for 4 s; a second consumer calling
  /// every 20 ms is still answered every time (no timeout), and so is the bystander. The flood
  /// itself gets answers or FORSETTI_ERR_BUSY (its queue full), nothing else.
  @Test(.timeLimit(.minutes(5)), arguments: Mode.allCases)
  func aFloodingConsumerDoesNotStarveAnother(_ mode: Mode) throws {
    let h = RuntimeHarness()
    try Self.installProvider(h)
    var flood = Self.consumerFixture(body: "")
    flood.prelude = """
      #include <pthread.h>
      #include <time.h>
      static const forsetti_role_service *db;
      static volatile int g_run = 1;
      static pthread_t g_threads[16];
      static volatile long g_ok, g_bad, g_busy;
      static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
      static void *loop(void *arg) {
        (void)arg; char out[64]; size_t n; double end = now() + 4;
        while (g_run && now() < end) {
          forsetti_status s = db->call("echo", "flood", 5, out, sizeof out, &n);
          if (s == FORSETTI_OK) __atomic_add_fetch(&g_ok, 1, __ATOMIC_RELAXED);
          else if (s == FORSETTI_ERR_BUSY) __atomic_add_fetch(&g_busy, 1, __ATOMIC_RELAXED);
          else __atomic_add_fetch(&g_bad, 1, __ATOMIC_RELAXED);
        }
        return NULL;
      }
      static void *report(void *arg) {
        (void)arg;
        for (int i = 0; i < 16; i++) pthread_join(g_threads[i], NULL);
        char l[128]; snprintf(l, sizeof l, "flood ok=%ld busy=%ld bad=%ld", g_ok, g_busy, g_bad); fixture_log(l);
        return NULL;
      }
      """
    flood.start = """
      db = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      if (!db) { fixture_log("consumer: no role service"); return FORSETTI_OK; }
      for (int i = 0; i < 16; i++) pthread_create(&g_threads[i], NULL, loop, NULL);
      pthread_t r; pthread_create(&r, NULL, report, NULL); pthread_detach(r);
      return FORSETTI_OK;
      """
    flood.stop = "g_run = 0;"
    try Self.installConsumer(h, flood)
    try Self.installConsumer(
      h,
      Self.consumerFixture(
        id: Self.other, entry: "rt_other_entry",
        body: """
          char out[64]; size_t n; long ok = 0; long bad = 0; int worst = 0;
          for (int i = 0; g_run && i < 150; i++) {
            forsetti_status s = db->call("echo", "polite", 6, out, sizeof out, &n);
            if (s == FORSETTI_OK) ok++; else { bad++; worst = s; }
            usleep(20000);
          }
          say("polite ok=%ld bad=%ld", ok, bad); say("polite worst=%ld %ld", worst, 0);
          """))
    try Self.bystanderFixture().install(in: h.dir, capabilities: ["crypto_utilities"])
    let m = try h.start(mode: mode.execution)
    defer { m.stopAll() }
    let flooded = h.waitForLine(Self.consumer, timeout: 60) { $0.hasPrefix("flood ") }
    let polite = h.waitForLine(Self.other, timeout: 30) { $0.hasPrefix("polite ok=") }
    #expect(flooded?.hasSuffix(" bad=0") == true, "\(flooded ?? "no flood line")")
    #expect(flooded?.contains(" ok=0 ") == false, "\(flooded ?? "no flood line")")
    #expect(polite?.hasSuffix(" bad=0") == true, "\(h.lines(Self.other))")
    #expect(Self.bystanderCount(h) > 0, "\(h.lines(Self.bystander))")
  }

  // MARK: - 4. Lying lengths

  /// What the C ABI lets a caller lie about. NULL with a length, a missing out-length, an
  /// over-long or non-UTF-8 method, an absurd request length: refused by the host before use.
  /// A capacity larger than the real buffer is the module's own fault (the host writes up to
  /// that many bytes into it); here the buffer is larger than what the provider answers, and a
  /// canary behind the answer shows the host wrote exactly the answer, no more.
  @Test(.timeLimit(.minutes(5)), arguments: Mode.allCases)
  func lyingLengthsAreRefusedOrAreTheCallersOwnFault(_ mode: Mode) throws {
    let h = RuntimeHarness()
    try Self.installProvider(h)
    try Self.installConsumer(
      h,
      Self.consumerFixture(
        body: """
          unsigned char *buf = malloc(6000); size_t n = 0;
          char longname[400]; memset(longname, 'm', sizeof longname - 1); longname[sizeof longname - 1] = 0;
          say("null-method %ld%ld", db->call(NULL, "x", 1, buf, 100, &n), 0);
          say("null-request %ld%ld", db->call("echo", NULL, 5, buf, 100, &n), 0);
          say("null-response %ld%ld", db->call("echo", "x", 1, NULL, 100, &n), 0);
          say("null-length %ld%ld", db->call("echo", "x", 1, buf, 100, NULL), 0);
          say("long-method %ld%ld", db->call(longname, "x", 1, buf, 100, &n), 0);
          say("bad-utf8 %ld%ld", db->call("\\xff\\xfe", "x", 1, buf, 100, &n), 0);
          say("empty-method %ld%ld", db->call("", "x", 1, buf, 100, &n), 0);
          say("huge-request %ld%ld", db->call("echo", "x", (size_t)-1, buf, 100, &n), 0);
          say("too-large-request %ld%ld", db->call("echo", buf, 64 * 1024 + 1, buf, 100, &n), 0);
          memset(buf, 0xA5, 6000);
          forsetti_status s = db->call("big", "", 0, buf, (size_t)-1, &n);
          int canary = 1; for (int i = 5000; i < 6000; i++) if (buf[i] != 0xA5) canary = 0;
          say("huge-capacity %ld len=%ld", s, (long)n); say("huge-capacity-canary %ld%ld", canary, 0);
          s = db->call("huge-need", "", 0, buf, 100, &n);
          say("huge-need %ld len-over-64k=%ld", s, n > 64 * 1024);
          free(buf);
          fixture_log("lies done");
          """))
    let m = try h.start(mode: mode.execution)
    defer { m.stopAll() }
    #expect(
      h.waitForLine(Self.consumer, timeout: 60) { $0 == "lies done" } != nil, "\(h.lines(Self.consumer))")
    let lines = h.lines(Self.consumer)
    let invalid = FORSETTI_ERR_INVALID_ARGUMENT
    for label in [
      "null-method", "null-request", "null-response", "null-length", "long-method", "bad-utf8",
      "empty-method",
    ] {
      #expect(lines.contains("\(label) \(invalid)0"), "\(label): \(lines)")
    }
    #expect(lines.contains("huge-request \(FORSETTI_ERR_TOO_LARGE)0"), "\(lines)")
    #expect(lines.contains("too-large-request \(FORSETTI_ERR_TOO_LARGE)0"), "\(lines)")
    #expect(lines.contains("huge-capacity 0 len=5000"), "\(lines)")
    #expect(lines.contains("huge-capacity-canary 10"), "\(lines)")
    // A provider's "I need 2^62 bytes" is no size any response may have: not passed on.
    #expect(lines.contains("huge-need \(FORSETTI_ERR_IO) len-over-64k=0"), "\(lines)")
  }

  // MARK: - 5. Cycles

  /// A holds shared_database and consumes authentication; B the other way round. The consumer
  /// calls A, whose handler calls B, whose handler calls A back: that inner call would close a
  /// cycle and is refused at once with FORSETTI_ERR_CALL_CYCLE (before anything is sent), so
  /// the outer call is answered; nothing waits for a timeout, and the next direct call of A is
  /// answered.
  @Test(.timeLimit(.minutes(5)), arguments: Mode.allCases)
  func aCycleOfTwoRolesIsRefusedAtOnce(_ mode: Mode) throws {
    let h = RuntimeHarness()
    func member(
      _ id: String, _ entry: String, serves: String, servesID: String, calls: String, callsID: String
    )
      -> ModuleFixture
    {
      var f = ModuleFixture(moduleID: id, entryPoint: entry)
      f.prelude = """
        static const forsetti_role_service *mine, *theirs;
        static forsetti_status handle(void *ctx, const char *caller, const char *method, const void *req,
                                      size_t len, void *resp, size_t cap, size_t *rlen) {
          (void)ctx; (void)req; (void)len;
          char inner[200]; size_t n = 0; forsetti_status s = FORSETTI_OK;
          if (strcmp(method, "cycle") == 0) s = theirs->call("cycle", "", 0, inner, sizeof inner - 1, &n);
          char l[300]; snprintf(l, sizeof l, "\(id) from %s: inner %d", caller, s); fixture_log(l);
          int w = snprintf(resp, cap, "%s:%d", "\(id)", s);
          *rlen = w < 0 ? 0 : (size_t)w < cap ? (size_t)w : cap;
          return FORSETTI_OK;
        }
        """
      f.start = """
        mine = host->resolve("\(servesID)"); theirs = host->resolve("\(callsID)");
        if (!mine || !theirs) { fixture_log("no role services"); return FORSETTI_ERR_START_FAILED; }
        return mine->serve(handle, NULL) == FORSETTI_OK ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
        """
      return f
    }
    let roles =
      #","manifestTemplateVersion":"1.1","runtimeRequirements":{"io":[],"dataIsolation":{"mode":"private_to_module","ownedStoreIDs":["s"],"requiredDefaultRoles":["ROLE"]}}"#
    try member(
      "com.test.redteam.a", "rt_a_entry", serves: "shared_database",
      servesID: "forsetti.role.shared_database",
      calls: "authentication", callsID: "forsetti.role.authentication"
    ).install(
      in: h.dir, capabilities: ["shared_database", "authentication"],
      manifestExtra: #","defaultModuleRole":"shared_database""#
        + roles.replacingOccurrences(of: "ROLE", with: "authentication"))
    try member(
      "com.test.redteam.b", "rt_b_entry", serves: "authentication", servesID: "forsetti.role.authentication",
      calls: "shared_database", callsID: "forsetti.role.shared_database"
    ).install(
      in: h.dir, capabilities: ["shared_database", "authentication"],
      manifestExtra: #","defaultModuleRole":"authentication""#
        + roles.replacingOccurrences(of: "ROLE", with: "shared_database"))
    try Self.installConsumer(
      h,
      Self.consumerFixture(
        body: #"if (cue("go")) { call("cycle"); call("direct"); } fixture_log("cycle done");"#))
    let m = try h.start(mode: mode.execution)
    defer { m.stopAll() }
    #expect(
      m.records.allSatisfy { $0.state == .started },
      "\(m.records.map { ($0.moduleID, $0.state, $0.trace.firstFailure) })")
    // Both members serve by now (they serve in start): the consumer may call, on a cue rather
    // than after a sleep that a loaded machine could outlast.
    #expect(
      FileManager.default.createFile(atPath: h.dir.url("state/sandboxes/\(Self.consumer)/go"), contents: nil))
    #expect(
      h.waitForLine(Self.consumer, timeout: 40) { $0 == "cycle done" } != nil, "\(h.lines(Self.consumer))")
    let lines = h.lines(Self.consumer)
    // The status, not the time: the outer call is answered, with B's refusal inside it.
    let cycle = Self.status(lines.first { $0.hasPrefix("cycle -> ") })
    #expect(cycle == FORSETTI_OK, "\(lines)")
    #expect(
      h.waitForLine("com.test.redteam.b", timeout: 60) {
        $0.hasPrefix("com.test.redteam.b from com.test.redteam.a: inner \(FORSETTI_ERR_CALL_CYCLE)")
      } != nil, "\(h.lines("com.test.redteam.b"))")
    // A's line crosses its own worker's log pipe: it may arrive after the consumer's.
    #expect(
      h.waitForLine("com.test.redteam.a", timeout: 60) {
        $0.hasPrefix("com.test.redteam.a from \(Self.consumer): inner \(FORSETTI_OK)")
      } != nil, "\(h.lines("com.test.redteam.a"))")
    // Nothing timed out on the way.
    #expect(!(h.lines(nil) + h.lines("com.test.redteam.a")).contains { $0.contains("timed out") })
    #expect(Self.status(lines.first { $0.hasPrefix("direct -> ") }) == FORSETTI_OK, "\(lines)")
  }

  // MARK: - 6. A provider crashing again and again

  /// Every call that makes the provider crash ends with FORSETTI_ERR_UNAVAILABLE (never a hang,
  /// never the timeout), through restarts and after the provider ran out of them; the bystander
  /// is served throughout.
  @Test(.timeLimit(.minutes(5))) func aProviderCrashingRepeatedlyOnlyEverYieldsUnavailable() throws {
    let h = RuntimeHarness()
    try Self.installProvider(h)
    try Self.installConsumer(
      h,
      Self.consumerFixture(
        body: """
          unsigned char out[64]; size_t n; long unavailable = 0, other = 0; int odd = 0;
          for (int i = 0; g_run && i < 40; i++) {
            forsetti_status s = db->call("crash", "", 0, out, sizeof out, &n);
            if (s == FORSETTI_ERR_UNAVAILABLE) unavailable++; else { other++; odd = s; }
            usleep(100000);
          }
          say("crashes unavailable=%ld other=%ld", unavailable, other); say("odd=%ld%ld", odd, 0);
          """))
    try Self.bystanderFixture().install(in: h.dir, capabilities: ["crypto_utilities"])
    let m = try h.start(mode: RuntimeHarness.isolated(maxRestarts: 3, backoff: 0.1))
    defer { m.stopAll() }
    var done: String?
    h.supervise(timeout: 40) {
      done = h.lines(Self.consumer).last { $0.hasPrefix("crashes ") }
      return done != nil
    }
    #expect(
      done?.hasSuffix(" other=0") == true, "\(h.lines(Self.consumer)) \(h.lines(Self.provider).suffix(5))")
    #expect(Self.bystanderCount(h) > 0, "\(h.lines(Self.bystander))")
    #expect(h.state(Self.bystander) == .started)
  }

  // MARK: - 7. Secure storage and crypto

  /// A victim stores a secret; a thief tries to name it through its key (`..`, `/`, the victim's
  /// ID, over-long), races set and get on its own key from two threads (never a torn or
  /// unauthenticated value), plants a symlink to the victim's sealed file in its own sandbox and
  /// opens it (refused), and in a worker cannot open the state directory at all.
  @Test(.timeLimit(.minutes(5)), arguments: Mode.allCases)
  func aModuleCannotReachAnotherModulesSecrets(_ mode: Mode) throws {
    let h = RuntimeHarness()
    let state = h.dir.url("state")
    let victim = "com.test.redteam.victim"
    let thief = "com.test.redteam.thief"
    var v = ModuleFixture(moduleID: victim, entryPoint: "rt_victim_entry")
    v.start = """
      const forsetti_secure_storage *ss = host->resolve(FORSETTI_SERVICE_SECURE_STORAGE);
      if (!ss) return FORSETTI_ERR_START_FAILED;
      forsetti_status s = ss->set("secret", "VICTIM-SECRET", 13);
      char l[64]; snprintf(l, sizeof l, "victim set %d", s); fixture_log(l);
      return FORSETTI_OK;
      """
    try v.install(in: h.dir, capabilities: ["secure_storage"])
    var t = ModuleFixture(moduleID: thief, entryPoint: "rt_thief_entry")
    t.prelude = """
      #include <pthread.h>
      #include <errno.h>
      static const forsetti_secure_storage *ss;
      static char a[4000], b[9000];
      static volatile long torn, invalid, rounds;
      static void try_get(const char *key) {
        char buf[256]; size_t n = 0;
        forsetti_status s = ss->get(key, buf, sizeof buf, &n);
        char l[700]; snprintf(l, sizeof l, "get [%.200s] -> %d %.*s", key, s, s == 0 ? (int)n : 0, buf); fixture_log(l);
      }
      static void *writer(void *arg) {
        (void)arg;
        for (int i = 0; i < 150; i++) ss->set("race", (i & 1) ? a : b, (i & 1) ? sizeof a : sizeof b);
        return NULL;
      }
      static void *reader(void *arg) {
        (void)arg; static char buf[10000];
        for (int i = 0; i < 150; i++) {
          size_t n = 0; forsetti_status s = ss->get("race", buf, sizeof buf, &n);
          if (s == FORSETTI_ERR_INVALID_DATA) invalid++;
          else if (s == FORSETTI_OK) {
            char c = n == sizeof a ? 'a' : n == sizeof b ? 'b' : 0;
            int whole = c != 0; for (size_t k = 0; whole && k < n; k++) if (buf[k] != c) whole = 0;
            if (!whole) torn++;
            rounds++;
          }
        }
        return NULL;
      }
      """
    t.start = """
      ss = host->resolve(FORSETTI_SERVICE_SECURE_STORAGE);
      const forsetti_storage *st = host->resolve(FORSETTI_SERVICE_STORAGE);
      if (!ss || !st) return FORSETTI_ERR_START_FAILED;
      char longkey[200]; memset(longkey, 'k', sizeof longkey - 1); longkey[sizeof longkey - 1] = 0;
      const char *keys[] = { "secret", "../\(victim)/secret", "..", "/", "\(victim)", "\(victim)/secret",
                             "..%2f\(victim)", "secret/../../\(victim)/secret", longkey };
      for (int i = 0; i < 9; i++) try_get(keys[i]);
      memset(a, 'a', sizeof a); memset(b, 'b', sizeof b);
      pthread_t w, r; pthread_create(&w, NULL, writer, NULL); pthread_create(&r, NULL, reader, NULL);
      pthread_join(w, NULL); pthread_join(r, NULL);
      char l[700]; snprintf(l, sizeof l, "race torn=%ld invalid=%ld rounds=%ld", torn, invalid, rounds); fixture_log(l);
      /* A link in its own sandbox to the victim's sealed value and to the key file. */
      char target[600];
      snprintf(target, sizeof target, "\(state)/secure/\(victim)/secret");
      snprintf(l, sizeof l, "%s/stolen", host->sandbox_path); symlink(target, l);
      snprintf(target, sizeof target, "\(state)/keys/\(victim).key");
      snprintf(l, sizeof l, "%s/stolen-key", host->sandbox_path); symlink(target, l);
      int fd = st->open_file("stolen", FORSETTI_OPEN_READ);
      snprintf(l, sizeof l, "open stolen -> %d", fd < 0 ? fd : 0); fixture_log(l); if (fd >= 0) close(fd);
      fd = st->open_file("stolen-key", FORSETTI_OPEN_READ);
      snprintf(l, sizeof l, "open stolen-key -> %d", fd < 0 ? fd : 0); fixture_log(l); if (fd >= 0) close(fd);
      fd = open("\(state)/secure/\(victim)/secret", O_RDONLY);
      snprintf(l, sizeof l, "direct open -> %s", fd >= 0 ? "opened" : "refused"); fixture_log(l); if (fd >= 0) close(fd);
      fixture_log("thief done");
      return FORSETTI_OK;
      """
    // The thief starts after the victim (module-ID order).
    try t.install(in: h.dir, capabilities: ["secure_storage", "storage"])
    let m = try h.start(mode: mode.execution)
    defer { m.stopAll() }
    #expect(h.waitForLine(thief, timeout: 30) { $0 == "thief done" } != nil, "\(h.lines(thief))")
    #expect(h.lines(victim).contains("victim set 0"))
    let lines = h.lines(thief)
    #expect(!lines.contains { $0.contains("VICTIM-SECRET") }, "\(lines)")
    #expect(lines.contains("get [secret] -> \(FORSETTI_ERR_NOT_FOUND) "), "\(lines)")
    #expect(lines.contains("get [\(victim)] -> \(FORSETTI_ERR_NOT_FOUND) "), "\(lines)")
    for bad in [
      "../\(victim)/secret", "..", "/", "\(victim)/secret", "..%2f\(victim)", "secret/../../\(victim)/secret",
    ] {
      #expect(lines.contains("get [\(bad)] -> \(FORSETTI_ERR_INVALID_ARGUMENT) "), "\(bad): \(lines)")
    }
    #expect(
      lines.contains { $0.hasPrefix("get [kkkk") && $0.hasSuffix("-> \(FORSETTI_ERR_INVALID_ARGUMENT) ") })
    #expect(lines.contains { $0.hasPrefix("race torn=0 invalid=0 rounds=") }, "\(lines)")
    #expect(lines.contains("open stolen -> \(FORSETTI_ERR_DENIED)"), "\(lines)")
    #expect(lines.contains("open stolen-key -> \(FORSETTI_ERR_DENIED)"), "\(lines)")
    if mode == .isolated {
      // The worker's filesystem view does not hold the host's state directory.
      #expect(lines.contains("direct open -> refused"), "\(lines)")
    }
    // The victim's value is still its own and intact.
    let sealed = try Data(contentsOf: URL(fileURLWithPath: "\(state)/secure/\(victim)/secret"))
    #expect(!sealed.isEmpty && sealed.range(of: Data("VICTIM-SECRET".utf8)) == nil)
  }

  /// Crypto at its limits: 64 KiB in, sealed, opened and hashed; a byte more is TOO_LARGE; the
  /// same in a worker, where the whole call crosses in one frame.
  @Test(.timeLimit(.minutes(5)), arguments: Mode.allCases)
  func cryptoAtItsLimits(_ mode: Mode) throws {
    let h = RuntimeHarness()
    var f = ModuleFixture(moduleID: "com.test.redteam.crypto", entryPoint: "rt_crypto_entry")
    f.prelude = "static unsigned char in[65 * 1024 + 64], out[65 * 1024 + 128], back[65 * 1024];"
    f.start = """
      const forsetti_crypto *c = host->resolve(FORSETTI_SERVICE_CRYPTO);
      if (!c) return FORSETTI_ERR_START_FAILED;
      char l[200]; size_t n = 0, m = 0; const size_t max = FORSETTI_CRYPTO_MAX_INPUT;
      for (size_t i = 0; i < sizeof in; i++) in[i] = (unsigned char)(i * 7);
      snprintf(l, sizeof l, "random-max %d", c->random_bytes(out, max)); fixture_log(l);
      snprintf(l, sizeof l, "random-over %d", c->random_bytes(out, max + 1)); fixture_log(l);
      snprintf(l, sizeof l, "random-huge %d", c->random_bytes(out, (size_t)-1)); fixture_log(l);
      snprintf(l, sizeof l, "hash-max %d", c->hash(in, max, out, 64)); fixture_log(l);
      snprintf(l, sizeof l, "hash-digest-65 %d", c->hash(in, 10, out, 65)); fixture_log(l);
      forsetti_status s = c->seal(in, max, NULL, 0, out, sizeof out, &n);
      snprintf(l, sizeof l, "seal-max %d %zu", s, n); fixture_log(l);
      s = c->open(out, n, NULL, 0, back, sizeof back, &m);
      snprintf(l, sizeof l, "open-max %d %zu same=%d", s, m, m == max && memcmp(back, in, max) == 0); fixture_log(l);
      snprintf(l, sizeof l, "seal-with-extra-over %d", c->seal(in, max, in, 1, out, sizeof out, &n)); fixture_log(l);
      snprintf(l, sizeof l, "seal-huge %d", c->seal(in, (size_t)-1, NULL, 0, out, sizeof out, &n)); fixture_log(l);
      snprintf(l, sizeof l, "seal-huge-extra %d", c->seal(in, 1, in, (size_t)-1 / 2 + 2, out, sizeof out, &n)); fixture_log(l);
      snprintf(l, sizeof l, "open-garbage %d", c->open(in, max + 40, NULL, 0, back, sizeof back, &m)); fixture_log(l);
      snprintf(l, sizeof l, "open-over %d", c->open(in, max + 41, NULL, 0, back, sizeof back, &m)); fixture_log(l);
      snprintf(l, sizeof l, "sign-max %d", c->sign(in, max, out)); fixture_log(l);
      fixture_log("crypto done");
      return FORSETTI_OK;
      """
    try f.install(in: h.dir, capabilities: ["crypto_utilities"])
    let m = try h.start(mode: mode.execution)
    defer { m.stopAll() }
    let id = "com.test.redteam.crypto"
    #expect(h.waitForLine(id, timeout: 60) { $0 == "crypto done" } != nil, "\(h.lines(id))")
    let lines = h.lines(id)
    let big = FORSETTI_ERR_TOO_LARGE
    for expected in [
      "random-max 0", "random-over \(big)", "random-huge \(big)", "hash-max 0",
      "hash-digest-65 \(FORSETTI_ERR_INVALID_ARGUMENT)", "seal-max 0 \(64 * 1024 + 40)",
      "open-max 0 \(64 * 1024) same=1", "seal-with-extra-over \(big)", "seal-huge \(big)",
      "seal-huge-extra \(big)",
      "open-garbage \(FORSETTI_ERR_INVALID_DATA)", "open-over \(big)", "sign-max 0",
    ] {
      #expect(lines.contains(expected), "\(expected): \(lines)")
    }
  }

  // MARK: - 8. File export

  /// A name with a NUL inside, as only a forged worker frame can carry it (the C table reads a C
  /// string): what the host writes and what it reports must be the same file, and ".." hidden
  /// behind a NUL must be refused as ".." is. FINDING (low): today "a\0b" writes "a" and reports
  /// the path ".../a\0b", and "..\0x" is not refused but fails as an I/O error.
  @Test
  func aNameWithANulInsideIsRefused() throws {
    let dir = TemporaryDirectory("redteam-export-nul")
    let export = dir.url("export")
    try FileManager.default.createDirectory(atPath: export, withIntermediateDirectories: true)
    let services = HostServices(
      stateDirectory: dir.url("state"), exportDirectory: export, log: MemoryLogSink())
    let caller = ModuleCaller(moduleID: "com.test.x", granted: [.fileExport])
    for name in [Array("a".utf8) + [0] + Array("b".utf8), Array("..".utf8) + [0] + Array("x".utf8), [0]] {
      let r = services.answer(
        ServiceRequest(.exportWrite, capacity: 4096, number: HostFunctions.exportWantsPath, [name, [1]]),
        from: caller)
      #expect(r.status == FORSETTI_ERR_INVALID_ARGUMENT, "\(name): \(r)")
    }
    #expect(try FileManager.default.contentsOfDirectory(atPath: export).isEmpty)
  }

  /// What a forged frame can do with NUL today, pinned so that a change is seen: never more
  /// than one file beneath the export directory, nothing outside it.
  @Test func aNulInsideANameNeverEscapesTheExportDirectory() throws {
    let dir = TemporaryDirectory("redteam-export-nul-pin")
    let export = dir.url("export")
    try FileManager.default.createDirectory(atPath: export, withIntermediateDirectories: true)
    let outside = dir.url("outside.txt")
    try "outside".write(toFile: outside, atomically: true, encoding: .utf8)
    let services = HostServices(
      stateDirectory: dir.url("state"), exportDirectory: export, log: MemoryLogSink())
    let caller = ModuleCaller(moduleID: "com.test.x", granted: [.fileExport])
    let names: [[UInt8]] = [
      Array("..".utf8) + [0] + Array("x".utf8), Array(".".utf8) + [0], [0],
      Array("..".utf8) + [0] + Array("/outside.txt".utf8),
    ]
    for name in names {
      for flags: Int64 in [0, Int64(FORSETTI_FILE_EXPORT_APPEND)] {
        let r = services.answer(
          ServiceRequest(.exportWrite, capacity: 0, number: flags, [name, [0x41]]), from: caller)
        #expect(r.status != FORSETTI_OK || name.last != 0, "\(name) flags \(flags): \(r)")
      }
    }
    #expect(try String(contentsOfFile: outside, encoding: .utf8) == "outside")
    #expect(try String(contentsOfFile: dir.url("export/../outside.txt"), encoding: .utf8) == "outside")
    #expect(!FileManager.default.fileExists(atPath: dir.url("x")))
    let left = try FileManager.default.contentsOfDirectory(atPath: export).filter {
      $0.hasPrefix(".forsetti-export")
    }
    #expect(left.isEmpty, "\(left)")
  }

  /// While the module writes and appends the same two names hundreds of times, the test swaps
  /// a symbolic link to a file outside and a regular file in and out under those names:
  /// the outside file is never written; long names are taken to 255 bytes and refused beyond.
  @Test(.timeLimit(.minutes(5)), arguments: Mode.allCases)
  func symlinkSwapsInTheExportDirectoryNeverWriteOutside(_ mode: Mode) throws {
    try Self.swapRace(mode, hardLinks: false)
  }

  /// Was a finding (fixed): the same race with a hard link to the outside file swapped in and removed again.
  /// An append opens the name while it is a second link to the outside file, the link goes,
  /// and `fstat` then sees one link: the host appends to the outside file ("outsideAAAAA").
  /// Then a second (fixed, issue 41's session, seen once in a loaded CI run: "outsideA"): a name
  /// being unlinked still resolves after its link count dropped, so the check by name passed;
  /// the file is now taken under a private name before it is judged and written.
  @Test(.timeLimit(.minutes(5)), arguments: Mode.allCases)
  func hardLinkSwapsInTheExportDirectoryNeverWriteOutside(_ mode: Mode) throws {
    try Self.swapRace(mode, hardLinks: true)
  }

  static func swapRace(_ mode: Mode, hardLinks: Bool) throws {
    let h = RuntimeHarness()
    let export = h.dir.url("export")
    try FileManager.default.createDirectory(atPath: export, withIntermediateDirectories: true)
    let outside = h.dir.url("outside.txt")
    try "outside".write(toFile: outside, atomically: true, encoding: .utf8)
    let id = "com.test.redteam.exporter"
    // The module's own directory, where the swaps happen.
    let own = export + "/" + id
    try FileManager.default.createDirectory(atPath: own, withIntermediateDirectories: true)
    var f = ModuleFixture(moduleID: id, entryPoint: "rt_export_entry")
    f.prelude = """
      #include <pthread.h>
      static void *swaps(void *arg) {
        const forsetti_file_export *fx = arg; char l[300];
      long counts[8] = {0};
      for (int i = 0; i < 400; i++) {
        forsetti_status a = fx->write("swap-append", "A", 1, FORSETTI_FILE_EXPORT_APPEND, NULL, 0);
        forsetti_status r = fx->write("swap-replace", "R", 1, 0, NULL, 0);
        counts[a == 0 ? 0 : a == FORSETTI_ERR_DENIED ? 1 : 2]++;
        counts[r == 0 ? 3 : 4]++;
      }
      snprintf(l, sizeof l, "swaps append-ok=%ld append-denied=%ld append-other=%ld replace-ok=%ld replace-other=%ld",
               counts[0], counts[1], counts[2], counts[3], counts[4]);
      fixture_log(l);
      fixture_log("exports done");
        return NULL;
      }
      """
    f.start = """
      const forsetti_file_export *fx = host->resolve(FORSETTI_SERVICE_FILE_EXPORT);
      if (!fx) return FORSETTI_ERR_START_FAILED;
      char l[200]; char path[4096];
      char n255[256]; memset(n255, 'n', 255); n255[255] = 0;
      char n256[257]; memset(n256, 'n', 256); n256[256] = 0;
      static char deep[5000]; memset(deep, 'd', sizeof deep - 1); deep[sizeof deep - 1] = 0;
      snprintf(l, sizeof l, "name-255 %d", fx->write(n255, "x", 1, 0, NULL, 0)); fixture_log(l);
      snprintf(l, sizeof l, "name-256 %d", fx->write(n256, "x", 1, 0, NULL, 0)); fixture_log(l);
      snprintf(l, sizeof l, "name-5000 %d", fx->write(deep, "x", 1, 0, NULL, 0)); fixture_log(l);
      snprintf(l, sizeof l, "path-null-with-capacity %d", fx->write("p.txt", "x", 1, 0, NULL, 100)); fixture_log(l);
      snprintf(l, sizeof l, "data-null-with-length %d", fx->write("p.txt", NULL, 10, 0, path, sizeof path)); fixture_log(l);
      pthread_t t; pthread_create(&t, NULL, swaps, (void *)fx); pthread_detach(t);
      return FORSETTI_OK;
      """
    try f.install(in: h.dir, capabilities: ["file_export"])
    // The swapper runs from before the module starts until it is done.
    let stop = Atomic(false)
    let swapper = Thread {
      var i = 0
      while !stop.load(ordering: .relaxed) {
        for name in ["swap-append", "swap-replace"] {
          let path = own + "/" + name
          unlink(path)
          switch i % 3 {
          case 0: symlink(outside, path)
          case 1 where hardLinks: link(outside, path)
          default: close(open(path, O_CREAT | O_WRONLY | O_NOFOLLOW, 0o644))
          }
        }
        i += 1
      }
    }
    swapper.start()
    defer { stop.store(true, ordering: .relaxed) }
    let m = try FileExportTests.start(h, export: export, isolated: mode == .isolated)
    defer { m.stopAll() }
    #expect(h.waitForLine(id, timeout: 40) { $0 == "exports done" } != nil, "\(h.lines(id))")
    stop.store(true, ordering: .relaxed)
    let lines = h.lines(id)
    #expect(lines.contains("name-255 0"), "\(lines)")
    #expect(lines.contains("name-256 \(FORSETTI_ERR_INVALID_ARGUMENT)"), "\(lines)")
    #expect(lines.contains("name-5000 \(FORSETTI_ERR_INVALID_ARGUMENT)"), "\(lines)")
    #expect(lines.contains("path-null-with-capacity \(FORSETTI_ERR_INVALID_ARGUMENT)"), "\(lines)")
    #expect(lines.contains("data-null-with-length \(FORSETTI_ERR_INVALID_ARGUMENT)"), "\(lines)")
    #expect(
      lines.contains {
        $0.hasPrefix("swaps ") && $0.hasSuffix("append-other=0 replace-ok=400 replace-other=0")
      }, "\(lines)")
    let after = try String(contentsOfFile: outside, encoding: .utf8)
    #expect(after == "outside", "outside now holds \(after.debugDescription)")
  }

  // MARK: - 9. Diagnostics

  /// 40 counters (32 kept), a re-set beyond the limit, a 257-byte or non-UTF-8 summary, an
  /// unknown health, and 4 threads reporting 2000 times each: refusals with the named status,
  /// the board bounded and consistent, and the host still serving.
  @Test(.timeLimit(.minutes(5)), arguments: Mode.allCases)
  func diagnosticsFloodsAndOversizeAreBounded(_ mode: Mode) throws {
    let h = RuntimeHarness()
    let id = "com.test.redteam.diag"
    var f = ModuleFixture(moduleID: id, entryPoint: "rt_diag_entry")
    f.prelude = """
      #include <pthread.h>
      static const forsetti_diagnostics *dg;
      static volatile long g_bad;
      static void *spam(void *arg) {
        long k = (long)arg;
        for (int i = 0; i < 2000; i++) {
          if (dg->report(i & 1 ? FORSETTI_HEALTH_DEGRADED : FORSETTI_HEALTH_OK, "spam") != FORSETTI_OK) g_bad++;
          if (dg->set_counter(k & 1 ? "c0" : "c1", i) != FORSETTI_OK) g_bad++;
        }
        return NULL;
      }
      """
    f.start = """
      dg = host->resolve(FORSETTI_SERVICE_DIAGNOSTICS);
      if (!dg) return FORSETTI_ERR_START_FAILED;
      char l[200], name[16]; int refused = 0, kept = 0;
      for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof name, "c%d", i);
        forsetti_status s = dg->set_counter(name, i);
        if (s == FORSETTI_OK) kept++; else if (s == FORSETTI_ERR_TOO_LARGE) refused++;
      }
      snprintf(l, sizeof l, "counters kept=%d refused=%d", kept, refused); fixture_log(l);
      snprintf(l, sizeof l, "reset-existing %d", dg->set_counter("c5", 500)); fixture_log(l);
      snprintf(l, sizeof l, "bad-name %d", dg->set_counter("a b", 1)); fixture_log(l);
      snprintf(l, sizeof l, "null-name %d", dg->set_counter(NULL, 1)); fixture_log(l);
      char big[300]; memset(big, 's', sizeof big - 1); big[sizeof big - 1] = 0; big[257] = 0;
      snprintf(l, sizeof l, "summary-257 %d", dg->report(FORSETTI_HEALTH_OK, big)); fixture_log(l);
      big[256] = 0;
      snprintf(l, sizeof l, "summary-256 %d", dg->report(FORSETTI_HEALTH_OK, big)); fixture_log(l);
      snprintf(l, sizeof l, "summary-bad-utf8 %d", dg->report(FORSETTI_HEALTH_OK, "\\xff\\xfe")); fixture_log(l);
      snprintf(l, sizeof l, "health-7 %d", dg->report(7, "x")); fixture_log(l);
      snprintf(l, sizeof l, "health-negative %d", dg->report(-1, "x")); fixture_log(l);
      pthread_t t[4];
      for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, spam, (void *)i);
      for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
      snprintf(l, sizeof l, "spam bad=%ld", g_bad); fixture_log(l);
      snprintf(l, sizeof l, "final %d", dg->report(FORSETTI_HEALTH_FAILING, "line one\\nline two\\x1b[31m")); fixture_log(l);
      fixture_log("diag done");
      return FORSETTI_OK;
      """
    try f.install(in: h.dir, capabilities: ["diagnostics"])
    let m = try h.start(mode: mode.execution)
    #expect(h.waitForLine(id, timeout: 40) { $0 == "diag done" } != nil, "\(h.lines(id))")
    let lines = h.lines(id)
    let big = FORSETTI_ERR_TOO_LARGE
    let invalid = FORSETTI_ERR_INVALID_ARGUMENT
    for expected in [
      "counters kept=32 refused=8", "reset-existing 0", "bad-name \(invalid)", "null-name \(invalid)",
      "summary-257 \(big)", "summary-256 0", "summary-bad-utf8 \(invalid)", "health-7 \(invalid)",
      "health-negative \(invalid)", "spam bad=0", "final 0",
    ] {
      #expect(lines.contains(expected), "\(expected): \(lines)")
    }
    let health = m.environment.services.reportedHealth[id]
    #expect(health?.counters.count == 32)
    #expect(health?.counters["c5"] == 500)
    #expect(health?.status == .failing)
    #expect(health?.summary == "line one\nline two\u{1b}[31m")
    m.stopAll()
    // Dropped when the module stops.
    #expect(m.environment.services.reportedHealth[id] == nil)
  }
}
