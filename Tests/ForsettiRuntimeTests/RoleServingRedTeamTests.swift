import CForsetti
import ForsettiBridge
import ForsettiCore
import ForsettiTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

@testable import ForsettiRuntime

/// The red team of role serving under load (issue 39, ABI 1.3): hostile C modules, as a vendor
/// can ship them, against the promises of docs/architecture.md section 7 — a consumer cannot get
/// a healthy provider killed as hung, a module cannot get a third module's call refused as a
/// cycle nor starve another consumer beyond one call per handler, a provider cannot make the
/// host or another worker crash or hang by what it writes, and a polite consumer beside a
/// flooding one is still served. Each attack runs through a real `ModuleManager` with real
/// workers; each "nothing happens" has a positive control that shows the same observation sees
/// it when it does happen.
@Suite(.onTestThreads, .serialized) struct RoleServingRedTeamTests {
  static let provider = "com.test.rsrt.db"
  static let consumer = "com.test.rsrt.app"
  static let polite = "com.test.rsrt.polite"
  static let stuck = "com.test.rsrt.stuck"
  static let stuckCaller = "com.test.rsrt.stuckcaller"
  static let bystander = "com.test.rsrt.bystander"

  typealias F = RoleLoadFixtures

  static func roleIndex(_ role: DefaultModuleRole) -> Int {
    DefaultModuleRole.allCases.firstIndex(of: role) ?? -1
  }

  /// Past the longest a handler may stay in one call before it is hung (the call's 10 s and the
  /// 5 s grace), with a margin for a loaded machine.
  static let pastHung = Double(FORSETTI_ROLE_CALL_TIMEOUT_MS + FORSETTI_ROLE_HUNG_GRACE_MS) / 1000 + 4

  // MARK: - C helpers

  /// C that writes a consumer's own channel by hand (found as `ServicesRedTeamTests.ringAccess`
  /// finds it: /proc/self/maps, else a scan for the page whose lane 0 last carried `method`):
  /// the 4096-byte header (word 0 the bell), then lanes of (64 + 2 × 128 KiB) bytes, each a
  /// `CallRing` header of 32-bit words (`LN_*`), its request slot and its response slot. Also
  /// `sv_*`: a `service` frame written straight into this worker's call ring (fd 4's mapping,
  /// found by its size), as `HungProviderTests.forgery` does, and `pg_*`: this worker's own
  /// progress page after its two rings.
  static let laneAccess =
    ServicesRedTeamTests.ringAccess + "\n" + HungProviderTests.forgery + "\n"
      + """
      #include <pthread.h>
      #include <errno.h>
      #define LN_HEADER 4096u
      enum { LN_REQ_SEQ, LN_RESP_SEQ, LN_SERVER_ASLEEP, LN_CLIENT_ASLEEP, LN_REQ_LEN, LN_RESP_LEN, LN_CLOSED,
             LN_GATE, LN_DEADLINE, LN_DEADLINE_HI, LN_STARTED, LN_STARTED_HI, LN_SENT, LN_SENT_HI };
      static unsigned char *ln_channel;
      static uint64_t ln_now(void) {
        struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
        return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
      }
      static unsigned char *ln_lane(int i) { return ln_channel + LN_HEADER + (size_t)i * RT_RING; }
      static uint32_t *ln_word(int i, int w) { return (uint32_t *)ln_lane(i) + w; }
      static uint32_t ln_load(int i, int w) { return __atomic_load_n(ln_word(i, w), __ATOMIC_SEQ_CST); }
      static void ln_store(int i, int w, uint32_t v) { __atomic_store_n(ln_word(i, w), v, __ATOMIC_SEQ_CST); }
      static void ln_store64(int i, int w, uint64_t v) { ln_store(i, w, (uint32_t)v); ln_store(i, w + 1, (uint32_t)(v >> 32)); }
      /* This consumer's channel, whose lane 0 last carried `method`: 1 when found. */
      static int ln_find(const char *method) {
        unsigned char *lane0 = rt_map_method(method);
        if (!lane0 || lane0 == rt_serve_ring) return 0;
        ln_channel = lane0 - LN_HEADER;
        return 1;
      }
      static void ln_bell(void) {
        uint32_t *bell = (uint32_t *)ln_channel;
        __atomic_add_fetch(bell, 1, __ATOMIC_SEQ_CST);
        syscall(SYS_futex, bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
      }
      /* A serveCall of `method` on lane `i`, written by hand with the path deadline `deadline`
       * (the lane's deadline word too): its sequence number. */
      static uint32_t ln_send(int i, const char *method, const void *req, uint32_t n, uint64_t deadline, uint64_t id) {
        unsigned char *slot = ln_lane(i) + 64;
        uint32_t kind = 8; memcpy(slot, &kind, 4); memcpy(slot + 4, &id, 8);
        size_t at = 12;
        at += rt_int(slot + at, 256);
        at += rt_bytes(slot + at, "", 0);
        at += rt_bytes(slot + at, method, (uint32_t)strlen(method));
        at += rt_bytes(slot + at, req, n);
        at += rt_int(slot + at, 0);
        at += rt_int(slot + at, (int64_t)deadline);
        uint32_t seq = ln_load(i, LN_REQ_SEQ) + 1;
        ln_store(i, LN_REQ_LEN, (uint32_t)at);
        ln_store64(i, LN_DEADLINE, deadline);
        ln_store64(i, LN_SENT, ln_now());
        ln_store(i, LN_GATE, (seq << 2) | 1);
        ln_store(i, LN_REQ_SEQ, seq);
        ln_bell();
        return seq;
      }
      /* Waits up to `ms` for the answer to `seq` on lane `i`: its status (-100: none), the
       * answer's bytes as text into `out` (64 bytes) when given. */
      static int64_t ln_await(int i, uint32_t seq, int ms, char *out) {
        for (int k = 0; k < ms && ln_load(i, LN_RESP_SEQ) != seq; k++) usleep(1000);
        if (ln_load(i, LN_RESP_SEQ) != seq) return -100;
        unsigned char *r = ln_lane(i) + 64 + RT_FRAME;
        int64_t status; memcpy(&status, r + 13, 8);
        if (out) {
          uint32_t len = 0; if (r[30] == 2) memcpy(&len, r + 31, 4);
          if (len > 63) len = 63;
          memcpy(out, r + 35, len); out[len] = 0;
        }
        return status;
      }
      /* Waits up to `ms` for a handler to begin `seq` on lane `i` (its gate word running). */
      static int ln_running(int i, uint32_t seq, int ms) {
        for (int k = 0; k < ms; k++) { if (ln_load(i, LN_GATE) == ((seq << 2) | 2)) return 1; usleep(1000); }
        return 0;
      }

      static unsigned char *sv_ring;
      static int sv_map(void) {
        for (int fd = 3; fd < 256 && !sv_ring; fd++) {
          struct stat st;
          if (fstat(fd, &st) != 0 || st.st_size != (off_t)\(CallRing.mappingSize)) continue;
          void *p = mmap(NULL, \(CallRing.mappingSize), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
          if (p != MAP_FAILED) sv_ring = p;
        }
        return sv_ring != NULL;
      }
      static uint32_t *sv_word(int i) { return (uint32_t *)sv_ring + i; }
      /* A `service(roleCall)` frame of the role of index `role`, written into this worker's call
       * ring by hand (the path's deadline `deadline`, none when 0): the host's status (-100 when
       * nothing answered within `wait_ms`). Not to be mixed with the worker's own calls. */
      static int64_t sv_role_call(uint64_t id, int64_t role, const char *method, uint64_t deadline, int wait_ms) {
        if (!sv_map()) return -101;
        unsigned char *slot = sv_ring + 64;
        uint32_t kind = 113; memcpy(slot, &kind, 4); memcpy(slot + 4, &id, 8);
        size_t at = 12;
        at += rt_int(slot + at, 40);
        at += rt_int(slot + at, 256);
        at += rt_int(slot + at, role);
        at += rt_bytes(slot + at, method, (uint32_t)strlen(method));
        at += rt_bytes(slot + at, "", 0);
        if (deadline) {
          unsigned char path[9]; path[0] = 0; memcpy(path + 1, &deadline, 8);
          at += rt_bytes(slot + at, path, 9);
        }
        __atomic_store_n(sv_word(4), (uint32_t)at, __ATOMIC_RELEASE);
        uint32_t seq = __atomic_load_n(sv_word(0), __ATOMIC_ACQUIRE) + 1;
        __atomic_store_n(sv_word(0), seq, __ATOMIC_SEQ_CST);
        syscall(SYS_futex, sv_word(0), FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
        for (int fd = 3; fd < 256; fd++) {
          struct stat st; uint64_t one = 1;
          if (fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == 0) (void)!write(fd, &one, sizeof one);
        }
        for (int i = 0; i < wait_ms * 10 && __atomic_load_n(sv_word(1), __ATOMIC_ACQUIRE) != seq; i++) usleep(100);
        if (__atomic_load_n(sv_word(1), __ATOMIC_ACQUIRE) != seq) return -100;
        int64_t status; memcpy(&status, sv_ring + 64 + RT_FRAME + 13, 8);
        return status;
      }
      /* This worker's own progress page (after its call and serve rings). */
      static uint32_t *pg_page(void) { return sv_map() ? (uint32_t *)(sv_ring + 2 * RT_RING) : NULL; }
      static void sleep_ms(long ms) {
        struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
        while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
      }
      """

  // MARK: - Fixtures

  /// A healthy provider of `role`: `echo` answers "ok" at once, `slow` after `slowMillis` ms
  /// (logging `slow call from CALLER` with `logCalls`), `left` answers `time_left_ns()` as
  /// decimal text, `hang` logs `hanging` and never returns. Logs `serving pid=N` at each start.
  static func providerFixture(
    id: String = provider, entry: String = "rsrt_db_entry", role: String = "shared_database",
    concurrency: Int = 1, slowMillis: Int = 3000, logCalls: Bool = false
  ) -> ModuleFixture {
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.prelude = """
      #include <errno.h>
      #include <time.h>
      static const forsetti_role_service *g_role;
      static void pv_sleep(long ms) {
        struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
        while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
      }
      static forsetti_status handle(void *ctx, const char *caller, const char *method, const void *req,
                                    size_t len, void *resp, size_t cap, size_t *rlen) {
        (void)ctx; (void)req; (void)len;
        char o[64]; snprintf(o, sizeof o, "ok");
        if (strcmp(method, "hang") == 0) { fixture_log("hanging"); for (;;) sleep(1000); }
        if (strcmp(method, "slow") == 0) {
          if (\(logCalls ? 1 : 0)) { char l[300]; snprintf(l, sizeof l, "slow call from %s", caller); fixture_log(l); }
          pv_sleep(\(slowMillis));
        }
        if (strcmp(method, "left") == 0) snprintf(o, sizeof o, "%llu", (unsigned long long)g_role->time_left_ns());
        size_t n = strlen(o); if (n > cap) return FORSETTI_ERR_BUFFER_TOO_SMALL;
        memcpy(resp, o, n); *rlen = n;
        return FORSETTI_OK;
      }
      """
    f.start = """
      g_role = host->resolve(\(F.service(role)));
      if (!g_role) { fixture_log("no role service"); return FORSETTI_ERR_START_FAILED; }
      char l[64]; snprintf(l, sizeof l, "serving pid=%d", (int)getpid()); fixture_log(l);
      forsetti_status s = \(concurrency == 1 ? "g_role->serve(handle, NULL)" : "g_role->serve_concurrently(handle, NULL, \(concurrency))");
      return s == FORSETTI_OK ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    return f
  }

  static func installProvider(_ h: RuntimeHarness, _ f: ModuleFixture, role: String = "shared_database")
    throws
  {
    try f.install(in: h.dir, capabilities: [role], manifestExtra: F.holds(role), ccFlags: ["-D_GNU_SOURCE"])
  }

  /// A consumer of `role` whose thread waits for the provider to serve (`echo` answered other than
  /// UNAVAILABLE), then runs `body` (C statements; `db` is the role service, `say(text)` logs).
  /// Its prelude holds `laneAccess`.
  static func consumerFixture(
    id: String = consumer, entry: String = "rsrt_app_entry", role: String = "shared_database", body: String,
    extraPrelude: String = ""
  ) -> ModuleFixture {
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.prelude =
      laneAccess + """

        static const forsetti_role_service *db;
        static pthread_t g_thread;
        static volatile int g_run = 1;
        static const char *g_sandbox;
        __attribute__((unused)) static void say(const char *text) { fixture_log(text); }
        __attribute__((unused)) static int cue(const char *name) {
          char p[700]; snprintf(p, sizeof p, "%s/%s", g_sandbox, name);
          for (int i = 0; i < 12000 && g_run; i++) { if (access(p, F_OK) == 0) return 1; usleep(10000); }
          return 0;
        }
        \(extraPrelude)
        static void *loop(void *arg) {
          (void)arg;
          char out[64], l[400]; size_t n = 0; forsetti_status s = FORSETTI_ERR_UNAVAILABLE;
          for (int tries = 0; s == FORSETTI_ERR_UNAVAILABLE && tries < 300 && g_run; tries++) {
            if (tries) usleep(100000);
            s = db->call("echo", "", 0, out, sizeof out, &n);
          }
          snprintf(l, sizeof l, "echo before -> %d", s); fixture_log(l);
          \(body)
          return NULL;
        }
        """
    f.start = """
      db = host->resolve(\(F.service(role)));
      if (!db) { fixture_log("consumer: no role service"); return FORSETTI_ERR_START_FAILED; }
      g_sandbox = strdup(host->sandbox_path);
      return pthread_create(&g_thread, NULL, loop, NULL) == 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    f.stop = "g_run = 0;"
    return f
  }

  static func installConsumer(_ h: RuntimeHarness, _ f: ModuleFixture, role: String = "shared_database")
    throws
  {
    try f.install(
      in: h.dir, capabilities: [role], manifestExtra: F.consumes(role), ccFlags: ["-D_GNU_SOURCE"])
  }

  /// The positive control of every "the provider keeps its pid": a provider of `api` really stuck
  /// in one call (its consumer calls `hang` once), which the host must kill within the call's
  /// deadline and the grace, in the same run, watched the same way.
  static func installStuckPair(_ h: RuntimeHarness) throws {
    try installProvider(h, providerFixture(id: stuck, entry: "rsrt_stuck_entry", role: "api"), role: "api")
    try installConsumer(
      h,
      consumerFixture(
        id: stuckCaller, entry: "rsrt_stuckcaller_entry", role: "api",
        body: """
          n = 0; s = db->call("hang", "", 0, out, sizeof out, &n);
          snprintf(l, sizeof l, "hang -> %d", s); fixture_log(l);
          """), role: "api")
  }

  /// A `name=N` word of a log line.
  static func word(_ line: String?, _ name: String) -> Int? { line.flatMap { F.words($0)[name] } }

  /// The status after ` -> ` in a line.
  static func status(_ line: String?) -> Int32? {
    guard let line, let arrow = line.range(of: " -> ") else { return nil }
    return Int32(line[arrow.upperBound...].prefix { $0 == "-" || $0.isNumber })
  }

  static func killLines(_ h: RuntimeHarness, _ id: String) -> [String] {
    h.lines(id).filter { $0.contains("killing its worker") || $0.hasPrefix("crashed") }
  }

  // MARK: - (a) A consumer cannot get a healthy provider killed as hung

  /// The consumer calls `echo` (answered), then rewrites every lane of its channel so that a call
  /// looks running since one second after boot with a deadline long past (gate running, answer
  /// sequence behind the request's, started/sent/deadline words old), and reports
  /// `service(roleStalled)` 20 times. The hung verdict reads only the provider's own progress
  /// page, on which no handler is busy: the provider keeps its pid well past the call's deadline
  /// and the grace. Positive control, in the same run: a provider really stuck in one call is
  /// killed (new pid, a `hung:` line naming the call).
  @Test(.timeLimit(.minutes(5)))
  func aConsumerForgingAnOldRunningCallOnItsLanesAndReportingStallsDoesNotGetAHealthyProviderKilled() throws {
    let h = RuntimeHarness()
    try Self.installProvider(h, Self.providerFixture())
    try Self.installConsumer(
      h,
      Self.consumerFixture(
        body: """
          int found = ln_find("echo");
          snprintf(l, sizeof l, "channel found=%d", found); fixture_log(l);
          if (found) {
            uint64_t ago = 1000000000ull;
            for (int i = 0; i < \(Int(FORSETTI_ROLE_QUEUE_DEPTH) + 1); i++) {
              uint32_t seq = i == 0 ? ln_load(0, LN_REQ_SEQ) : 1000u + (uint32_t)i;
              ln_store64(i, LN_STARTED, ago); ln_store64(i, LN_SENT, ago); ln_store64(i, LN_DEADLINE, ago + 1000000000ull);
              ln_store(i, LN_GATE, (seq << 2) | 2);
              ln_store(i, LN_REQ_SEQ, seq);
              ln_store(i, LN_RESP_SEQ, seq - 1);
            }
            ln_bell();
          }
          int64_t last = 0; int ok = 0;
          for (int i = 0; i < 20; i++) { last = forge_stalled(0x7100000000000000ull + (uint64_t)i); ok += last == 0; }
          snprintf(l, sizeof l, "forged stalls ok=%d last=%lld", ok, (long long)last); fixture_log(l);
          """))
    try Self.installStuckPair(h)
    let m = try h.start(mode: RuntimeHarness.isolated(maxRestarts: 3, backoff: 0.1))
    defer { m.stopAll() }
    #expect(m.records.allSatisfy { $0.state == .started }, "\(m.records.map { ($0.moduleID, $0.state) })")
    let pid = try #require(m.workerPID(Self.provider))
    let stuckPID = try #require(m.workerPID(Self.stuck))
    let forged = h.waitForLine(Self.consumer, timeout: 60) { $0.hasPrefix("forged stalls ") }
    #expect(h.lines(Self.consumer).contains("echo before -> 0"), "\(h.lines(Self.consumer))")
    #expect(h.lines(Self.consumer).contains("channel found=1"), "\(h.lines(Self.consumer))")
    #expect(forged == "forged stalls ok=20 last=0", "\(h.lines(Self.consumer))")
    // The stuck provider's call is under way (the control's clock starts with it).
    #expect(h.waitForLine(Self.stuck, timeout: 30) { $0 == "hanging" } != nil, "\(h.lines(Self.stuck))")
    h.supervise(timeout: Self.pastHung) { false }
    // Positive control: the same watch sees a kill when a handler really is stuck.
    let restarted = h.supervise(timeout: 30) { m.workerPID(Self.stuck).map { $0 != stuckPID } ?? false }
    #expect(restarted, "\(h.lines(Self.stuck)) / \(h.lines(nil).suffix(6))")
    #expect(
      h.lines(Self.stuck).contains { $0.hasPrefix("hung: ") && $0.contains("\"hang\"") },
      "\(h.lines(Self.stuck))")
    // The attack: nothing.
    #expect(m.workerPID(Self.provider) == pid)
    #expect(h.state(Self.provider) == .started)
    #expect(Self.killLines(h, Self.provider).isEmpty, "\(h.lines(Self.provider))")
  }

  /// How the consumer sends its own `slow` call on a spare lane by hand: with the deadline a call
  /// has (10 s from now), or with one near 2^64 (the path deadline word is the consumer's to
  /// write). The provider's handler begins it and answers it after 3 s, as a healthy provider
  /// does; while the handler is in it the consumer reports `service(roleStalled)` once.
  enum ForgedDeadline: String, CaseIterable, CustomTestStringConvertible {
    case tenSeconds, nearTwoToTheSixtyFour
    var testDescription: String { rawValue }
    var c: String {
      switch self {
      case .tenSeconds: "ln_now() + 10000000000ull"
      case .nearTwoToTheSixtyFour: "UINT64_MAX - 1000ull"
      }
    }
  }

  /// Was a finding (fixed in 83197e9): the provider's worker took the deadline of a call on a
  /// channel from the consumer's frame unclamped and wrote it to its own progress page;
  /// `RoleChannels.due` added the grace with wrapping arithmetic, so a deadline within 5 s of
  /// 2^64 made the call "due" at about boot + 5 s and one forged `roleStalled` killed the healthy
  /// provider. `RoleServer.answer` now takes no deadline later than the longest a call may have.
  /// `.tenSeconds` is the control: the same call, same report, no kill.
  @Test(.timeLimit(.minutes(5)), arguments: ForgedDeadline.allCases)
  func aConsumerChoosingItsCallsDeadlineCannotGetAHealthyProviderKilled(_ deadline: ForgedDeadline) throws {
    let h = RuntimeHarness()
    try Self.installProvider(h, Self.providerFixture(slowMillis: 3000))
    let spare = Int(FORSETTI_ROLE_QUEUE_DEPTH)
    try Self.installConsumer(
      h,
      Self.consumerFixture(
        body: """
          int found = ln_find("echo");
          snprintf(l, sizeof l, "channel found=%d", found); fixture_log(l);
          if (!found) return NULL;
          uint32_t seq = ln_send(\(spare), "slow", "", 0, \(deadline.c), 0x7200000000000001ull);
          int running = ln_running(\(spare), seq, 5000);
          int64_t stalled = running ? forge_stalled(0x7200000000000002ull) : -1;
          snprintf(l, sizeof l, "slow begun=%d stalled -> %lld", running, (long long)stalled); fixture_log(l);
          char text[64] = "";
          int64_t answered = ln_await(\(spare), seq, 20000, text);
          snprintf(l, sizeof l, "forged slow -> %lld %s", (long long)answered, text); fixture_log(l);
          """))
    try Self.installStuckPair(h)
    let m = try h.start(mode: RuntimeHarness.isolated(maxRestarts: 3, backoff: 0.1))
    defer { m.stopAll() }
    #expect(m.records.allSatisfy { $0.state == .started }, "\(m.records.map { ($0.moduleID, $0.state) })")
    let pid = try #require(m.workerPID(Self.provider))
    let stuckPID = try #require(m.workerPID(Self.stuck))
    let begun = h.waitForLine(Self.consumer, timeout: 60) { $0.hasPrefix("slow begun=") }
    #expect(begun == "slow begun=1 stalled -> 0", "\(h.lines(Self.consumer))")
    // The provider answers its call, as a healthy provider does.
    let answered = h.waitForLine(Self.consumer, timeout: 40) { $0.hasPrefix("forged slow -> ") }
    #expect(answered == "forged slow -> 0 ok", "\(h.lines(Self.consumer)) / \(h.lines(Self.provider))")
    #expect(h.waitForLine(Self.stuck, timeout: 30) { $0 == "hanging" } != nil, "\(h.lines(Self.stuck))")
    h.supervise(timeout: Self.pastHung) { false }
    let restarted = h.supervise(timeout: 30) { m.workerPID(Self.stuck).map { $0 != stuckPID } ?? false }
    #expect(restarted, "positive control: \(h.lines(Self.stuck))")
    #expect(m.workerPID(Self.provider) == pid, "\(h.lines(Self.provider))")
    #expect(Self.killLines(h, Self.provider).isEmpty, "\(h.lines(Self.provider))")
  }

  /// A deadline the consumer writes into its own call's frame on its lane: 5 s from now (sooner
  /// than the call timeout, as `call_within` may ask), or an hour from now.
  enum Horizon: String, CaseIterable, CustomTestStringConvertible {
    case fiveSeconds, anHour
    var testDescription: String { rawValue }
    var c: String {
      switch self {
      case .fiveSeconds: "ln_now() + 5000000000ull"
      case .anHour: "ln_now() + 3600000000000ull"
      }
    }
  }

  /// roles.h: "every call has a deadline, FORSETTI_ROLE_CALL_TIMEOUT_MS from its start (or
  /// sooner)", and a handler reads what is left of it with `time_left_ns`. A consumer writes the
  /// deadline of its own call on its lane: the handler must still see at most 10 s left (it
  /// does: the worker takes no deadline later than the longest a call may have, and
  /// `RoleCall.run` runs the handler with `path.forCall()`, clamped to the timeout too).
  @Test(.timeLimit(.minutes(3)), arguments: Horizon.allCases)
  func aHandlerNeverSeesMoreTimeThanTheCallTimeout(_ horizon: Horizon) throws {
    let h = RuntimeHarness()
    try Self.installProvider(h, Self.providerFixture())
    let spare = Int(FORSETTI_ROLE_QUEUE_DEPTH)
    try Self.installConsumer(
      h,
      Self.consumerFixture(
        body: """
          if (!ln_find("echo")) { fixture_log("no channel"); return NULL; }
          uint32_t seq = ln_send(\(spare), "left", "", 0, \(horizon.c), 0x7300000000000001ull);
          char text[64] = "";
          int64_t answered = ln_await(\(spare), seq, 20000, text);
          snprintf(l, sizeof l, "left -> %lld left=%s", (long long)answered, text); fixture_log(l);
          n = 0; s = db->call("left", "", 0, out, sizeof out - 1, &n);
          out[s == 0 && n < sizeof out ? n : 0] = 0;
          snprintf(l, sizeof l, "plain left -> %d left=%s", s, out); fixture_log(l);
          """))
    let m = try h.start(mode: RuntimeHarness.isolated(maxRestarts: 3, backoff: 0.1))
    defer { m.stopAll() }
    let forged = h.waitForLine(Self.consumer, timeout: 60) { $0.hasPrefix("left -> ") }
    let plain = h.waitForLine(Self.consumer, timeout: 30) { $0.hasPrefix("plain left -> ") }
    // Positive control: a call made through the API sees at most the call timeout, and more than 0.
    let plainLeft = Self.word(plain, "left") ?? -1
    #expect(
      Self.status(plain) == 0 && plainLeft > 0 && plainLeft <= Int(RoleCall.timeoutNanoseconds),
      "\(h.lines(Self.consumer))")
    #expect(Self.status(forged) == 0, "\(h.lines(Self.consumer))")
    let left = Self.word(forged, "left") ?? -1
    #expect(left > 0 && left <= Int(RoleCall.timeoutNanoseconds), "\(forged ?? "no line")")
  }

  /// A provider stuck for good in one call is killed within that call's deadline and the grace
  /// (roles.h): its worker restarts and its other consumers are served again. Here the call it
  /// is stuck in is a consumer's own, sent by hand with a deadline `horizon` away. Was a finding
  /// (fixed in 83197e9): the deadline the consumer wrote was the one the hung verdict waited for,
  /// so a consumer could keep a stuck provider from being restarted for as long as it liked.
  /// `.fiveSeconds` is the control: killed.
  @Test(.timeLimit(.minutes(3)), arguments: Horizon.allCases)
  func aConsumersDeadlineCannotShieldAStuckProviderFromTheHungVerdict(_ horizon: Horizon) throws {
    let h = RuntimeHarness()
    try Self.installProvider(h, Self.providerFixture())
    let spare = Int(FORSETTI_ROLE_QUEUE_DEPTH)
    try Self.installConsumer(
      h,
      Self.consumerFixture(
        body: """
          if (!ln_find("echo")) { fixture_log("no channel"); return NULL; }
          uint32_t seq = ln_send(\(spare), "hang", "", 0, \(horizon.c), 0x7400000000000001ull);
          int running = ln_running(\(spare), seq, 5000);
          int64_t stalled = running ? forge_stalled(0x7400000000000002ull) : -1;
          snprintf(l, sizeof l, "hang begun=%d stalled -> %lld", running, (long long)stalled); fixture_log(l);
          """))
    let m = try h.start(mode: RuntimeHarness.isolated(maxRestarts: 3, backoff: 0.1))
    defer { m.stopAll() }
    let pid = try #require(m.workerPID(Self.provider))
    let begun = h.waitForLine(Self.consumer, timeout: 60) { $0.hasPrefix("hang begun=") }
    #expect(begun == "hang begun=1 stalled -> 0", "\(h.lines(Self.consumer))")
    // A safety net only: the wait ends when the new pid is seen.
    let restarted = h.supervise(timeout: Self.pastHung + 60) {
      m.workerPID(Self.provider).map { $0 != pid } ?? false
    }
    #expect(restarted, "\(h.lines(Self.provider)) / \(h.lines(nil).suffix(6))")
    #expect(
      h.lines(Self.provider).contains { $0.hasPrefix("hung: ") && $0.contains("\"hang\"") },
      "\(h.lines(Self.provider))")
  }

  // MARK: - (b)/(d) Fair queues: one call per handler, a polite consumer served

  /// Whether the flooder also tries to call the provider through the host (a `service(roleCall)`
  /// frame written into its own call ring: the path meant for providers in the host's process),
  /// besides its own channel.
  enum HostPath: String, CaseIterable, CustomTestStringConvertible {
    case channelOnly, alsoThroughTheHost
    var testDescription: String { rawValue }
  }

  /// The provider's handler runs one call at a time, logging whose call it begins. The flooder
  /// keeps a `slow` call (250 ms) queued on each lane of its channel (written by hand, so its
  /// worker's call ring stays free), the polite consumer calls `slow` in a loop from one thread.
  /// A polite call arrives while the flooder's call runs and waits for that one only
  /// (`FairQueue`: "at most one call per handler (the one running)"): never more than 1 flooder
  /// call between two polite calls. `.alsoThroughTheHost` adds the flooder's calls through the
  /// host (a `service(roleCall)` frame on its own call ring), which the host refuses for a
  /// provider in a worker: they would hold a host loop thread each and take the serve ring from
  /// the application; the polite consumer must still wait for at most one call. `.channelOnly`
  /// is the control. (At 22b30c4, before rounds, the control saw 2 and the attack 3; with rounds
  /// and the host relaying these calls to the serve ring, a queue of its own, the attack saw 2.)
  @Test(.timeLimit(.minutes(3)), arguments: HostPath.allCases)
  func aFlooderGetsOneTurnPerRoundWhateverPathItCallsOn(_ path: HostPath) throws {
    let h = RuntimeHarness()
    try Self.installProvider(h, Self.providerFixture(slowMillis: 250, logCalls: true))
    let flooding = 8
    try Self.installConsumer(
      h,
      Self.consumerFixture(
        body: """
          if (!ln_find("echo")) { fixture_log("no channel"); return NULL; }
          if (!cue("go")) return NULL;
          pthread_t host_path; int through_host = \(path == .alsoThroughTheHost ? 1 : 0);
          if (through_host) pthread_create(&host_path, NULL, via_host, NULL);
          uint64_t end = ln_now() + \(flooding)000000000ull, id = 0x7500000000000000ull;
          long sent = 0;
          while (ln_now() < end) {
            for (int i = 0; i < \(Int(FORSETTI_ROLE_QUEUE_DEPTH) + 1); i++) {
              if (ln_load(i, LN_RESP_SEQ) != ln_load(i, LN_REQ_SEQ)) continue;
              ln_send(i, "slow", "", 0, ln_now() + 10000000000ull, ++id);
              sent++;
            }
            usleep(1000);
          }
          if (through_host) pthread_join(host_path, NULL);
          snprintf(l, sizeof l, "flood sent=%ld via_host_ok=%ld via_host_other=%ld", sent, g_host_ok, g_host_other);
          fixture_log(l);
          """,
        extraPrelude: """
          static volatile long g_host_ok, g_host_other;
          static void *via_host(void *a) {
            (void)a; uint64_t end = ln_now() + \(flooding)000000000ull, id = 0x7600000000000000ull;
            while (ln_now() < end) {
              if (sv_role_call(++id, \(Self.roleIndex(.sharedDatabase)), "slow", 0, 12000) == 0) g_host_ok++;
              else { g_host_other++; usleep(1000); }
            }
            return NULL;
          }
          """))
    try Self.installConsumer(
      h,
      Self.consumerFixture(
        id: Self.polite, entry: "rsrt_polite_entry",
        body: """
          if (!cue("go")) return NULL;
          usleep(300000);
          uint64_t end = ln_now() + \(flooding - 1)000000000ull; long ok = 0, other = 0;
          while (ln_now() < end) {
            n = 0; s = db->call("slow", "", 0, out, sizeof out, &n);
            if (s == FORSETTI_OK) ok++; else other++;
          }
          snprintf(l, sizeof l, "polite ok=%ld other=%ld", ok, other); fixture_log(l);
          """))
    let m = try h.start(mode: RuntimeHarness.isolated(maxRestarts: 3, backoff: 0.1))
    defer { m.stopAll() }
    for id in [Self.consumer, Self.polite] {
      #expect(h.waitForLine(id, timeout: 60) { $0 == "echo before -> 0" } != nil, "\(h.lines(id))")
      #expect(FileManager.default.createFile(atPath: h.dir.url("state/sandboxes/\(id)/go"), contents: nil))
    }
    let flood = h.waitForLine(Self.consumer, timeout: 60) { $0.hasPrefix("flood ") }
    let politeLine = h.waitForLine(Self.polite, timeout: 60) { $0.hasPrefix("polite ") }
    #expect(Self.word(politeLine, "ok") ?? 0 >= 3, "\(h.lines(Self.polite))")
    if path == .alsoThroughTheHost {
      // The host refused every call on that path (the provider is in a worker: its consumers
      // call it on their channels), and the flooder did try it.
      #expect(Self.word(flood, "via_host_ok") == 0, "\(flood ?? "no flood line")")
      #expect(Self.word(flood, "via_host_other") ?? 0 > 0, "\(flood ?? "no flood line")")
    }
    // Whose calls the handler began, in order: the most flooder calls between two polite ones.
    let callers = h.lines(Self.provider).compactMap { line -> String? in
      line.hasPrefix("slow call from ") ? String(line.dropFirst("slow call from ".count)) : nil
    }
    var run = 0
    var worst = 0
    var seenPolite = false
    for c in callers {
      if c == Self.polite {
        if seenPolite { worst = max(worst, run) }
        seenPolite = true
        run = 0
      } else {
        run += 1
      }
    }
    #expect(callers.filter { $0 == Self.polite }.count >= 3, "\(callers)")
    #expect(worst <= 1, "flooder calls between two polite calls, at most: \(worst); \(callers)")
  }
  // MARK: - (c) A provider scribbling on everything it can write

  /// A hostile provider whose handler answers `echo` honestly while a thread of its worker
  /// writes random words, for 10 s, over everything it can reach: its consumer's channel (found
  /// by a scan of its address space: the header's bell, flag and counters, every lane's words —
  /// sequences, lengths up to 2^32 - 1, gate, deadline, started, sent — and the first bytes of
  /// every slot), its serve ring's words and response slot, and its own progress page (handler
  /// slots busy and idle, deadlines anywhere, the waits words). Meanwhile the consumer calls
  /// `echo` in a loop, the application calls through the serve ring, the test renders `/metrics`,
  /// the role report and the provider's load again and again, and a bystander calls crypto.
  /// Nothing but the provider may suffer: the host renders and answers (the application within
  /// its deadline), the consumer's every call returns by its deadline without overrunning its
  /// buffer and its worker keeps its pid, the bystander is served. Positive control: the scribbles
  /// reached the consumer (some of its calls were not answered OK).
  @Test(.timeLimit(.minutes(3)))
  func aProviderScribblingOnItsLanesHeaderPageAndServeRingHarmsNobodyElse() throws {
    let h = RuntimeHarness()
    var hostile = Self.providerFixture(id: Self.provider, entry: "rsrt_db_entry")
    hostile.prelude =
      Self.laneAccess + "\n"
      + hostile.prelude + """

        static uint64_t g_x = 88172645463325252ull;
        static uint32_t rnd(void) { g_x ^= g_x << 13; g_x ^= g_x >> 7; g_x ^= g_x << 17; return (uint32_t)g_x; }
        static uint32_t odd(void) {
          switch (rnd() % 6) {
            case 0: return 0; case 1: return 0xFFFFFFFFu; case 2: return 0x80000000u;
            case 3: return rnd() % 64; default: return rnd();
          }
        }
        static void *scribble(void *a) {
          (void)a; char l[200]; unsigned char *lane0 = NULL;
          for (int i = 0; i < 600 && !lane0; i++) {
            lane0 = rt_map_method("echo");
            if (lane0 == rt_serve_ring) lane0 = NULL;
            if (!lane0) usleep(100000);
          }
          uint32_t *page = pg_page();
          unsigned char *serve = sv_ring ? sv_ring + RT_RING : NULL;
          snprintf(l, sizeof l, "scribbling channel=%d page=%d serve=%d", lane0 != NULL, page != NULL, serve != NULL);
          fixture_log(l);
          if (!lane0) return NULL;
          ln_channel = lane0 - LN_HEADER;
          uint64_t end = ln_now() + 10000000000ull; long rounds = 0;
          while (ln_now() < end) {
            for (int w = 0; w < 64; w++) __atomic_store_n((uint32_t *)ln_channel + w, odd(), __ATOMIC_RELAXED);
            syscall(SYS_futex, (uint32_t *)ln_channel, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
            for (int i = 0; i < \(Int(FORSETTI_ROLE_QUEUE_DEPTH) + 1); i++) {
              for (int w = 0; w < 16; w++) if (w != LN_CLOSED) ln_store(i, w, odd());
              for (int b = 0; b < 64; b++) { ln_lane(i)[64 + b] = (unsigned char)rnd(); ln_lane(i)[64 + RT_FRAME + b] = (unsigned char)rnd(); }
              syscall(SYS_futex, ln_word(i, LN_RESP_SEQ), FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
            }
            if (serve) {
              for (int w = 1; w < 16; w++) if (w != 6) __atomic_store_n((uint32_t *)serve + w, odd(), __ATOMIC_RELAXED);
              for (int b = 0; b < 64; b++) serve[64 + RT_FRAME + b] = (unsigned char)rnd();
              syscall(SYS_futex, (uint32_t *)serve + 1, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
            }
            if (page) for (int w = 0; w < 1024; w++) __atomic_store_n(page + w, odd(), __ATOMIC_RELAXED);
            rounds++;
            usleep(200);
          }
          snprintf(l, sizeof l, "scribbled rounds=%ld", rounds); fixture_log(l);
          return NULL;
        }
        """
    hostile.start = """
      g_role = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      if (!g_role) { fixture_log("no role service"); return FORSETTI_ERR_START_FAILED; }
      char l[64]; snprintf(l, sizeof l, "serving pid=%d", (int)getpid()); fixture_log(l);
      if (g_role->serve(handle, NULL) != FORSETTI_OK) return FORSETTI_ERR_START_FAILED;
      pthread_t t; return pthread_create(&t, NULL, scribble, NULL) == 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    try Self.installProvider(h, hostile)
    try Self.installConsumer(
      h,
      Self.consumerFixture(
        body: """
          uint64_t end = ln_now() + 14000000000ull, worst = 0; long calls = 0, ok = 0, other = 0, broken = 0; int odd = 0;
          while (ln_now() < end && g_run) {
            unsigned char buf[256 + 64]; memset(buf + 256, 0xA5, 64);
            size_t k = 12345; uint64_t t0 = ln_now();
            forsetti_status st = db->call("echo", "", 0, buf, 256, &k);
            uint64_t took = ln_now() - t0; if (took > worst) worst = took;
            for (int i = 256; i < 256 + 64; i++) if (buf[i] != 0xA5) { broken++; break; }
            calls++; if (st == FORSETTI_OK && k <= 256) ok++; else { other++; odd = st; }
            if (st == FORSETTI_OK && k > 256) broken++;
            usleep(2000);
          }
          snprintf(l, sizeof l, "calls n=%ld ok=%ld other=%ld last_other=%d broken=%ld worst_ms=%llu",
                   calls, ok, other, odd, broken, (unsigned long long)(worst / 1000000)); fixture_log(l);
          """))
    try ServicesRedTeamTests.bystanderFixture().install(in: h.dir, capabilities: ["crypto_utilities"])
    let m = try h.start(mode: RuntimeHarness.isolated(maxRestarts: 10, backoff: 0.1))
    defer { m.stopAll() }
    let consumerPID = try #require(m.workerPID(Self.consumer))
    #expect(
      h.waitForLine(Self.provider, timeout: 60) { $0.hasPrefix("scribbling ") }
        == "scribbling channel=1 page=1 serve=1",
      "\(h.lines(Self.provider))")
    let before = ServicesRedTeamTests.bystanderCount(h)
    // The application through the serve ring, on a thread of its own: each call ends.
    let appStatuses = Mutex<[Int32]>([])
    let services = m.environment.services
    let app = Thread {
      for _ in 0..<8 {
        let r = services.callRole(.sharedDatabase, method: "echo", request: [], from: "red")
        appStatuses.withLock { $0.append(r.status) }
        usleep(300_000)
      }
    }
    app.start()
    // The host renders what it reads of the provider's words while they are scribbled on: a
    // count of looks, not a time, so a loaded machine only makes it slower.
    var renders = 0
    for _ in 0..<2_000 where renders < 50 {
      let text = MetricsExposition.render(m.environment.metrics, records: m.records)
      let report = RoleServingReport.make(m.environment)
      if text.contains("forsetti_module_role_calls_queued{module=\"\(Self.provider)\"}")
        || report[Self.provider] != nil
      {
        renders += 1
      }
      m.superviseOnce()
      usleep(50_000)
    }
    let calls = h.waitForLine(Self.consumer, timeout: 60) { $0.hasPrefix("calls ") }
    h.supervise(timeout: 30) { appStatuses.withLock { $0.count } == 8 }
    // The host rendered and answered throughout.
    #expect(renders >= 50, "renders: \(renders)")
    // Every call of the application ended (a call held for good would leave fewer).
    #expect(appStatuses.withLock { $0.count } == 8, "\(appStatuses.withLock { $0 })")
    // The consumer: every call back (its summary line comes once all have), its buffer never
    // overrun, its worker alive. (How late past its deadline a call may come back is timing, not
    // judged here: see the open finding on `call_within` on branch `wip/role-redteam`.)
    #expect(calls != nil, "\(h.lines(Self.consumer))")
    #expect(Self.word(calls, "broken") == 0, "\(calls ?? "no line")")
    #expect(m.workerPID(Self.consumer) == consumerPID && h.state(Self.consumer) == .started)
    #expect(Self.killLines(h, Self.consumer).isEmpty, "\(h.lines(Self.consumer))")
    // Positive control: the scribbles did reach the consumer.
    #expect((Self.word(calls, "other") ?? 0) > 0, "\(calls ?? "no line")")
    // The bystander was served all along.
    #expect(ServicesRedTeamTests.bystanderCount(h) > before, "\(h.lines(ServicesRedTeamTests.bystander))")
    #expect(
      !h.lines(ServicesRedTeamTests.bystander).contains { $0.contains("bad=") && !$0.hasSuffix("bad=0") })
  }

  // MARK: - (d) A consumer's own deadline, and turns for callers calling one at a time

  /// roles.h: `call_within(timeout_ms, …)` — "FORSETTI_ERR_TIMEOUT once it passes". The consumer
  /// calls `slow` (3 s) with `call_within(100)`, 5 times, timing each from its own thread. Each
  /// must return FORSETTI_ERR_TIMEOUT, in under a quarter of the time the same run's
  /// `call_within(2000)` for a 3 s call takes (the positive control: at least 1.9 s). Found by
  /// the red team: a waiter on a lane slept in `futex_wait(…, 1000 ms)` and looked at its
  /// deadline only when that returned, so a 100 ms deadline was about 10 times late; it now
  /// sleeps until its deadline at most (`CallRing.wait`).
  @Test(.timeLimit(.minutes(3)))
  func aConsumersOwnShortDeadlineIsHonoured() throws {
    let h = RuntimeHarness()
    try Self.installProvider(h, Self.providerFixture(slowMillis: 3000))
    try Self.installConsumer(
      h,
      Self.consumerFixture(
        body: """
          uint64_t worst = 0, best = UINT64_MAX; int timeouts = 0;
          for (int i = 0; i < 5; i++) {
            uint64_t t0 = ln_now();
            n = 0; s = db->call_within(100, "slow", "", 0, out, sizeof out, &n);
            uint64_t took = (ln_now() - t0) / 1000000;
            if (took > worst) worst = took;
            if (took < best) best = took;
            timeouts += s == FORSETTI_ERR_TIMEOUT;
            sleep_ms(3200);
          }
          snprintf(l, sizeof l, "within100 timeouts=%d best_ms=%llu worst_ms=%llu", timeouts,
                   (unsigned long long)best, (unsigned long long)worst); fixture_log(l);
          uint64_t t0 = ln_now();
          n = 0; s = db->call_within(2000, "slow", "", 0, out, sizeof out, &n);
          snprintf(l, sizeof l, "within2000 status=%d took_ms=%llu", s, (unsigned long long)((ln_now() - t0) / 1000000));
          fixture_log(l);
          """))
    let m = try h.start(mode: RuntimeHarness.isolated(maxRestarts: 3, backoff: 0.1))
    defer { m.stopAll() }
    let short = h.waitForLine(Self.consumer, timeout: 90) { $0.hasPrefix("within100 ") }
    let long = h.waitForLine(Self.consumer, timeout: 30) { $0.hasPrefix("within2000 ") }
    // Positive control: the timing sees a 2 s deadline as about 2 s.
    let tookLong = Self.word(long, "took_ms") ?? -1
    // A lower bound only: load can lengthen a wait, never shorten it.
    #expect(
      Self.word(long, "status") == Int(FORSETTI_ERR_TIMEOUT) && tookLong >= 1900, "\(long ?? "no line")")
    #expect(Self.word(short, "timeouts") == 5, "\(short ?? "no line")")
    // Against the same run's 2 s call, not a wall clock: a 100 ms deadline ends in under a quarter
    // of it (overshooting by a 1 s sleep, as before, it took half of it), however loaded the machine.
    let worst = Self.word(short, "worst_ms") ?? .max
    #expect(worst < Int.max / 4 && worst * 4 <= tookLong, "\(short ?? "no line"); \(long ?? "no line")")
  }

  /// The provider runs one call at a time (`slow`, 200 ms), logging whose call it begins. One
  /// consumer calls from 3 threads (so it always has calls queued), `polite` others from one
  /// thread each, one call after another, for 12 s. Each consumer waits at most one call of
  /// each other consumer per call of its own: between two calls of the 3-thread consumer, at
  /// most `polite` calls of the others. Found by the red team with `polite: 2`: `FairQueue` put
  /// a caller that starts waiting in the round under way, and a caller calling one at a time
  /// "starts waiting" anew at each call, so two of them, each calling again while the other's
  /// call runs, stayed in the round under way for ever while the consumer with calls queued had
  /// moved on to the next round, and its calls timed out; a caller served in the round under way
  /// now joins the next. `polite: 1` is the control (the two alternate).
  @Test(.timeLimit(.minutes(3)), arguments: [1, 2])
  func aConsumerWithCallsQueuedIsNotStarvedByConsumersCallingOneAtATime(_ polite: Int) throws {
    let h = RuntimeHarness()
    try Self.installProvider(h, Self.providerFixture(slowMillis: 200, logCalls: true))
    let busy = "com.test.rsrt.busy"
    let politeIDs = (0..<polite).map { "com.test.rsrt.one\($0)" }
    func caller(_ id: String, _ entry: String, threads: Int) -> ModuleFixture {
      Self.consumerFixture(
        id: id, entry: entry,
        body: """
          if (!cue("go")) return NULL;
          pthread_t t[\(threads)];
          for (int i = 0; i < \(threads); i++) pthread_create(&t[i], NULL, calls, NULL);
          for (int i = 0; i < \(threads); i++) pthread_join(t[i], NULL);
          snprintf(l, sizeof l, "calls ok=%ld timeout=%ld other=%ld", g_ok, g_timeout, g_other); fixture_log(l);
          """,
        extraPrelude: """
          static volatile long g_ok, g_timeout, g_other;
          static void *calls(void *a) {
            (void)a; char out[64]; size_t n = 0; uint64_t end = ln_now() + 12000000000ull;
            while (ln_now() < end && g_run) {
              forsetti_status s = db->call("slow", "", 0, out, sizeof out, &n);
              if (s == FORSETTI_OK) __atomic_add_fetch(&g_ok, 1, __ATOMIC_SEQ_CST);
              else if (s == FORSETTI_ERR_TIMEOUT) __atomic_add_fetch(&g_timeout, 1, __ATOMIC_SEQ_CST);
              else { __atomic_add_fetch(&g_other, 1, __ATOMIC_SEQ_CST); usleep(20000); }
            }
            return NULL;
          }
          """)
    }
    try Self.installConsumer(h, caller(busy, "rsrt_busy_entry", threads: 3))
    for (i, id) in politeIDs.enumerated() {
      try Self.installConsumer(h, caller(id, "rsrt_one\(i)_entry", threads: 1))
    }
    let m = try h.start(mode: RuntimeHarness.isolated(maxRestarts: 3, backoff: 0.1))
    defer { m.stopAll() }
    for id in [busy] + politeIDs {
      #expect(h.waitForLine(id, timeout: 60) { $0 == "echo before -> 0" } != nil, "\(h.lines(id))")
    }
    for id in [busy] + politeIDs {
      #expect(FileManager.default.createFile(atPath: h.dir.url("state/sandboxes/\(id)/go"), contents: nil))
    }
    let done = [busy] + politeIDs
    h.supervise(timeout: 60) { done.allSatisfy { id in h.lines(id).contains { $0.hasPrefix("calls ok=") } } }
    let busyLine = h.lines(busy).first { $0.hasPrefix("calls ok=") }
    let callers = h.lines(Self.provider).compactMap { line -> String? in
      line.hasPrefix("slow call from ") ? String(line.dropFirst("slow call from ".count)) : nil
    }
    // From the first call of every consumer on: the most calls of the others in a row.
    let start =
      done.compactMap { id in callers.firstIndex(of: id) }.max() ?? callers.count
    var run = 0
    var worst = 0
    for c in callers[start...] {
      if c == busy {
        run = 0
      } else {
        run += 1
        worst = max(worst, run)
      }
    }
    let summary = "\(busyLine ?? "no line"); \(politeIDs.map { h.lines($0).last ?? "" })"
    #expect(worst <= polite, "calls of the others in a row: \(worst); \(summary); \(callers.suffix(40))")
    #expect(Self.word(busyLine, "timeout") == 0, "\(summary)")
  }

  // MARK: - (e) The host's threads, held by calls relayed through it

  /// Found by the red team: a consumer in a worker could write `service(roleCall)` frames into
  /// its own call ring, which the host relayed to a provider in another worker, holding the loop
  /// thread serving that ring until the call was answered (here `slow`: 5 s); 26 such modules
  /// held every host loop thread (`WorkerLoop.defaultMax`, 24), and a bystander's crypto call
  /// waited ~10 s; with a 50 ms deadline the same frames kept the serve ring from the
  /// application (BUSY). The host now refuses such a call at once (UNAVAILABLE): a consumer in a
  /// worker reaches a provider in a worker only on its channel. Here three modules each try 20
  /// relayed `slow` calls: every one is refused, none reaches the handler (its log names every
  /// `slow` call it begins): refused before the provider's turn is asked for, nothing waits.
  /// Positive control: one `slow` call of each on its channel is logged by the handler.
  @Test(.timeLimit(.minutes(3)))
  func aCallRelayedThroughTheHostToAProviderInAWorkerIsRefusedAtOnce() throws {
    let h = RuntimeHarness()
    try Self.installProvider(h, Self.providerFixture(slowMillis: 2000, logCalls: true))
    let ids = (0..<3).map { "com.test.rsrt.relay\($0)" }
    let sdb = Self.roleIndex(.sharedDatabase)
    for (i, id) in ids.enumerated() {
      try Self.installConsumer(
        h,
        Self.consumerFixture(
          id: id, entry: "rsrt_relay\(i)_entry",
          body: """
            if (!cue("go")) return NULL;
            uint64_t id = 0x7900000000000000ull; int refused = 0, other = 0; int64_t last = 0;
            for (int k = 0; k < 20; k++) {
              last = sv_role_call(++id, \(sdb), "slow", 0, 12000);
              if (last == FORSETTI_ERR_UNAVAILABLE) refused++; else other++;
            }
            snprintf(l, sizeof l, "relayed refused=%d other=%d last=%lld", refused, other, (long long)last);
            fixture_log(l);
            n = 0; s = db->call("slow", "", 0, out, sizeof out, &n);
            snprintf(l, sizeof l, "channel slow -> %d", s); fixture_log(l);
            """))
    }
    let m = try h.start(mode: RuntimeHarness.isolated(maxRestarts: 3, backoff: 0.1))
    defer { m.stopAll() }
    for id in ids {
      #expect(h.waitForLine(id, timeout: 60) { $0 == "echo before -> 0" } != nil, "\(h.lines(id))")
    }
    for id in ids {
      #expect(FileManager.default.createFile(atPath: h.dir.url("state/sandboxes/\(id)/go"), contents: nil))
    }
    for id in ids {
      let relayed = h.waitForLine(id, timeout: 60) { $0.hasPrefix("relayed ") }
      #expect(Self.word(relayed, "refused") == 20, "\(id): \(relayed ?? "no line")")
      let channel = h.waitForLine(id, timeout: 60) { $0.hasPrefix("channel slow -> ") }
      #expect(channel == "channel slow -> 0", "\(id): \(h.lines(id))")
    }
    let begun = h.lines(Self.provider).filter { $0.hasPrefix("slow call from ") }
    // Positive control and the attack in one: the handler began exactly the channel calls.
    #expect(begun.sorted() == ids.map { "slow call from \($0)" }.sorted(), "\(begun)")
  }

  // MARK: - (d) Channels a consumer makes and unmakes

  /// The provider's worker's `Threads:` and `VmSize:` (kB), from /proc.
  static func workerLoad(_ pid: Int32) -> (threads: Int, kB: Int) {
    let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
    func field(_ name: String) -> Int {
      let line = status.split(separator: "\n").first { $0.hasPrefix(name + ":") }
      let value = line.map { $0.dropFirst(name.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }) }
      return value?.first.flatMap { Int($0) } ?? -1
    }
    return (field("Threads"), field("VmSize"))
  }

  /// The consumer makes its channel look closed (lane 0's `closed` word, through a second
  /// mapping of the channel made with mremap), calls (`call_within` 1 s: its worker asks the host
  /// for a channel, and the host, reading the old one closed, makes a new one and sends it to both
  /// workers), then opens the old one again: `rounds` times. The host forgot the old channel when
  /// it made the new one; the provider's worker keeps a thread for each channel it was sent until
  /// it reads that channel closed. A consumer connecting afterwards must be served, the provider's
  /// worker must not grow by a thread and mappings per channel ever made, and the provider is not
  /// restarted. Found by the red team with `rounds: 200`: every round left a thread (its stack, a
  /// malloc arena) and a 1.3 MB mapping in the provider's worker for good; within some 15 rounds
  /// the worker was at its address-space limit, threads for new channels no longer started, and
  /// consumers connecting later — here `late`, 3 plain calls — were never served. Now one thread
  /// watches up to 127 channels (`ChannelWatcher`) and a channel sent again for the same consumer
  /// replaces (and closes) the one before. `rounds: 0` is the control.
  @Test(.timeLimit(.minutes(5)), arguments: [0, 200])
  func aConsumerRemakingItsChannelCannotExhaustTheProvidersWorker(_ rounds: Int) throws {
    let h = RuntimeHarness()
    try Self.installProvider(h, Self.providerFixture())
    try Self.installConsumer(
      h,
      Self.consumerFixture(
        body: """
          if (!cue("churn")) return NULL;
          size_t size = LN_HEADER + \(Int(FORSETTI_ROLE_QUEUE_DEPTH) + 1) * (size_t)RT_RING;
          int rounds = 0, ok = 0, lost = 0, pfd[2];
          unsigned char *lane0 = NULL;
          if (pipe(pfd) != 0) return NULL;
          uint64_t stop = ln_now() + 60000000000ull;
          for (int k = 0; k < \(rounds) && ln_now() < stop; k++) {
            /* The channel now: where it was, else (this worker unmapped the old one, or the
             * provider's worker closed it) a call to get one, then found again. */
            if (!lane0 || !rt_is_channel(pfd, lane0, "echo")) {
              n = 0; s = db->call_within(1000, "echo", "", 0, out, sizeof out, &n);
              lane0 = s == FORSETTI_OK ? rt_map_method("echo") : NULL;
              if (lane0 == rt_serve_ring) lane0 = NULL;
              if (!lane0) { lost++; continue; }
            }
            void *dup = mremap(lane0 - LN_HEADER, 0, size, MREMAP_MAYMOVE);
            if (dup == MAP_FAILED) { lost++; break; }
            uint32_t *closed = (uint32_t *)((unsigned char *)dup + LN_HEADER) + LN_CLOSED;
            __atomic_store_n(closed, 1, __ATOMIC_SEQ_CST);
            n = 0; s = db->call_within(1000, "echo", "", 0, out, sizeof out, &n);
            __atomic_store_n(closed, 0, __ATOMIC_SEQ_CST);
            munmap(dup, size);
            rounds++; ok += s == FORSETTI_OK;
          }
          snprintf(l, sizeof l, "remade rounds=%d ok=%d lost=%d", rounds, ok, lost); fixture_log(l);
          """))
    // The late consumer makes its first call (and so its channel) on a cue, after the rounds.
    var late = Self.consumerFixture(id: "com.test.rsrt.late", entry: "rsrt_late_entry", body: "")
    late.start = """
      db = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      if (!db) { fixture_log("consumer: no role service"); return FORSETTI_ERR_START_FAILED; }
      g_sandbox = strdup(host->sandbox_path);
      return pthread_create(&g_thread, NULL, late_loop, NULL) == 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    late.prelude += """

      static void *late_loop(void *a) {
        (void)a; char out[64], l[200]; size_t n = 0; int ok = 0, worst = 0;
        if (!cue("go")) return NULL;
        for (int i = 0; i < 3; i++) {
          forsetti_status s = db->call("echo", "", 0, out, sizeof out, &n);
          if (s == FORSETTI_OK) ok++; else worst = s;
        }
        snprintf(l, sizeof l, "late ok=%d worst=%d", ok, worst); fixture_log(l);
        return NULL;
      }
      """
    try Self.installConsumer(h, late)
    let m = try h.start(mode: RuntimeHarness.isolated(maxRestarts: 3, backoff: 0.1))
    defer { m.stopAll() }
    let pid = try #require(m.workerPID(Self.provider))
    #expect(
      h.waitForLine(Self.consumer, timeout: 60) { $0 == "echo before -> 0" } != nil,
      "\(h.lines(Self.consumer))")
    let before = Self.workerLoad(pid)
    #expect(
      FileManager.default.createFile(
        atPath: h.dir.url("state/sandboxes/\(Self.consumer)/churn"), contents: nil))
    let remade = h.waitForLine(Self.consumer, timeout: 240) { $0.hasPrefix("remade ") }
    #expect(remade != nil, "\(h.lines(Self.consumer))")
    let after = Self.workerLoad(pid)
    #expect(
      FileManager.default.createFile(
        atPath: h.dir.url("state/sandboxes/com.test.rsrt.late/go"), contents: nil))
    let lateLine = h.waitForLine("com.test.rsrt.late", timeout: 60) { $0.hasPrefix("late ") }
    let seen = "\(remade ?? "no remade line"); provider's worker before \(before), after \(after)"
    #expect(lateLine == "late ok=3 worst=0", "\(lateLine ?? "no late line"); \(seen)")
    // Two consumers: a channel each, a thread each; the rest of the worker as it was.
    #expect(after.threads > 0 && after.threads <= before.threads + 4, "\(seen)")
    #expect(after.kB > 0 && after.kB <= before.kB + 200 * 1024, "\(seen)")
    #expect(m.workerPID(Self.provider) == pid, "\(h.lines(Self.provider))")
    #expect(Self.killLines(h, Self.provider).isEmpty, "\(h.lines(Self.provider))")
  }

  // MARK: - (d) Many polite consumers

  /// `count` consumer modules, nothing hostile, each calls `echo` once the provider serves (its
  /// first call makes its channel): every one must be answered. The workers run under a 1 GiB
  /// memory limit (`--memory-limit 1024`, the address space, RLIMIT_AS; the harness's). Found by
  /// the red team with `count: 24`: the provider's worker started a thread per consumer's
  /// channel, some 45 MB of address space each (an 8 MB stack, a malloc arena of its own, the
  /// channel's 1.3 MB); past about 14 channels no thread started for a new channel, and that
  /// consumer's every call was UNAVAILABLE, for good. Now one thread watches up to 127 channels
  /// (`ChannelWatcher`, asleep on all their bells at once). `count: 8` is the control.
  @Test(.timeLimit(.minutes(4)), arguments: [8, 24])
  func everyConsumerModuleIsServed(_ count: Int) throws {
    let h = RuntimeHarness()
    try Self.installProvider(h, Self.providerFixture())
    let ids = (0..<count).map { String(format: "com.test.rsrt.many%02d", $0) }
    for (i, id) in ids.enumerated() {
      var f = Self.consumerFixture(id: id, entry: "rsrt_many\(i)_entry", body: "")
      f.prelude += """

        static void *tries(void *a) {
          (void)a; char out[64], l[200]; size_t n = 0; forsetti_status s = FORSETTI_ERR_UNAVAILABLE;
          for (int i = 0; i < 8 && s == FORSETTI_ERR_UNAVAILABLE; i++) {
            uint64_t t0 = ln_now();
            s = db->call("echo", "", 0, out, sizeof out, &n);
            snprintf(l, sizeof l, "try %d -> %d after %llu ms", i, s, (unsigned long long)((ln_now() - t0) / 1000000));
            fixture_log(l);
            if (s == FORSETTI_ERR_UNAVAILABLE) usleep(100000);
          }
          snprintf(l, sizeof l, "echo before -> %d", s); fixture_log(l);
          return NULL;
        }
        """
      f.start = f.start.replacingOccurrences(
        of: "pthread_create(&g_thread, NULL, loop, NULL)",
        with: "pthread_create(&g_thread, NULL, tries, NULL)")
      try Self.installConsumer(h, f)
    }
    let m = try h.start(
      mode: RuntimeHarness.isolated(maxRestarts: 3, backoff: 0.1, memoryMiB: 1024, startTimeout: 60))
    defer { m.stopAll() }
    let pid = try #require(m.workerPID(Self.provider))
    h.supervise(timeout: 150) {
      ids.allSatisfy { id in h.lines(id).contains { $0.hasPrefix("echo before -> ") } }
    }
    let answers = ids.map { id in (id, h.lines(id).first { $0.hasPrefix("echo before -> ") } ?? "no answer") }
    let load = Self.workerLoad(pid)
    #expect(
      answers.allSatisfy { $0.1 == "echo before -> 0" },
      """
      \(answers.filter { $0.1 != "echo before -> 0" }); first refused: \
      \(answers.first { $0.1 != "echo before -> 0" }.map { h.lines($0.0) } ?? []); \
      provider's worker \(load); provider: \(h.lines(Self.provider).suffix(4))
      """)
  }
}
