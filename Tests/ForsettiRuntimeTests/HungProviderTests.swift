import CForsetti
import ForsettiBridge
import ForsettiCore
import ForsettiTestSupport
import Foundation
import Glibc
import Testing

@testable import ForsettiRuntime

/// A role provider that hangs (issue 25): its consumer's other host calls keep flowing while
/// a call of it waits, the host kills it as hung (only on the progress it sees, never on a consumer's
/// word) and supervision restarts it like a crash, up to quarantine. Real `.so` fixtures in
/// real workers, run by a real `ModuleManager`.
@Suite(.onTestThreads) struct HungProviderTests {
  static let provider = "com.test.hang.db"
  static let consumer = "com.test.hang.app"
  static let consumes = Placement.consumesSharedDatabase

  static func providerFixture() -> ModuleFixture {
    HungRoleFixtures.provider(moduleID: provider, entryPoint: "hang_db_entry")
  }

  static func installProvider(_ h: RuntimeHarness) throws {
    try providerFixture().install(
      in: h.dir, capabilities: ["shared_database"], manifestExtra: #","defaultModuleRole":"shared_database""#)
  }

  static func consumerFixture(times: Int) -> ModuleFixture {
    HungRoleFixtures.consumer(moduleID: consumer, entryPoint: "hang_app_entry", times: times)
  }

  /// While the consumer's call waits on the hung provider, its publishes are answered (the
  /// call ring is not held by the role call); the call itself then ends, so "outstanding" could
  /// have read 0. The host kills the provider as hung, and supervision restarts it: a new pid,
  /// and a host line saying it was hung, in which call, and for how long.
  @Test(.timeLimit(.minutes(5)))
  func aConsumerKeepsCallingTheHostWhileItsRoleCallHangsAndTheHungProviderIsRestarted() throws {
    let h = RuntimeHarness()
    try Self.installProvider(h)
    try Self.consumerFixture(times: 1).install(
      in: h.dir, capabilities: ["shared_database"], manifestExtra: Self.consumes)
    let m = try h.start(mode: RuntimeHarness.isolated(maxRestarts: 3, backoff: 0.1))
    defer { m.stopAll() }
    #expect(m.records.allSatisfy { $0.state == .started }, "\(m.records.map { ($0.moduleID, $0.state) })")
    let firstPID = try #require(m.workerPID(Self.provider))
    let published = h.waitForLine(Self.consumer, timeout: 60) { $0.hasPrefix("published ") }
    #expect(published == "published 50 of 50; call outstanding=1", "\(h.lines(Self.consumer))")
    // Positive control: the call does end (timed out), so the line above could have said 0.
    let ended = h.waitForLine(Self.consumer, timeout: 30) { $0.hasPrefix("hang -> ") }
    #expect(ended == "hang -> \(FORSETTI_ERR_TIMEOUT)", "\(h.lines(Self.consumer))")
    // Killed as hung (a handler in one call past its deadline and the grace), then restarted.
    let restarted = h.supervise(timeout: 40) {
      m.workerPID(Self.provider).map { $0 != firstPID } ?? false && h.state(Self.provider) == .started
    }
    #expect(restarted, "\(h.lines(Self.provider).suffix(6)) / \(h.lines(nil).suffix(6))")
    let hung = h.lines(Self.provider).first { $0.hasPrefix("hung: ") && $0.contains("killing its worker") }
    #expect(hung != nil, "\(h.lines(Self.provider))")
    #expect(hung?.contains("timed out") == true && hung?.contains(" ms") == true, "\(hung ?? "")")
    #expect(
      h.lines(Self.provider).contains { $0.hasPrefix("crashed: hung: ") }, "\(h.lines(Self.provider))")
  }

  /// Hung on every call: killed each time, restarted with the crash backoff, and quarantined
  /// once it has used up `maxRestarts`, as a crashing module is.
  @Test(.timeLimit(.minutes(5)))
  func aProviderHungAgainAndAgainIsQuarantinedLikeACrash() throws {
    let h = RuntimeHarness()
    try Self.installProvider(h)
    try Self.consumerFixture(times: 10).install(
      in: h.dir, capabilities: ["shared_database"], manifestExtra: Self.consumes)
    let m = try h.start(mode: RuntimeHarness.isolated(maxRestarts: 1, backoff: 0.1))
    defer { m.stopAll() }
    let quarantined = h.supervise(timeout: 120) { h.state(Self.provider) == .failed(.quarantined) }
    #expect(
      quarantined, "\(String(describing: h.state(Self.provider))) / \(h.lines(Self.provider).suffix(8))")
    let lines = h.lines(Self.provider)
    #expect(lines.filter { $0.hasPrefix("crashed: hung: ") }.count == 2, "\(lines)")
    #expect(lines.contains { $0.contains("\(ReasonCode.quarantined.rawValue): 2 crashes") }, "\(lines)")
    // The quarantine record says why: the load step quotes it when the module is next refused.
    let record = try String(contentsOfFile: h.dir.url("state/quarantine.json"), encoding: .utf8)
    #expect(record.contains("hung: "), "\(record)")
    // The consumer was never held past its own deadline, and runs on.
    #expect(h.state(Self.consumer) == .started)
  }

  /// C that writes `service(roleStalled)` frames straight into this worker's call ring (fd 4's
  /// mapping, found by its size), as a hostile module can: reports of timeouts that never
  /// happened. Returns the host's answer (the status), or -100 when nothing answered.
  static let forgery = """
    #include <stdint.h>
    #include <limits.h>
    #include <sys/mman.h>
    #include <sys/stat.h>
    #include <sys/syscall.h>
    #include <linux/futex.h>
    #define FG_FRAME (128u * 1024u)
    #define FG_RING (64u + 2u * FG_FRAME)
    static unsigned char *fg_ring;
    static uint32_t *fg_word(int i) { return (uint32_t *)fg_ring + i; }
    static size_t fg_int(unsigned char *p, int64_t v) { p[0] = 1; memcpy(p + 1, &v, 8); return 9; }
    static int64_t forge_stalled(uint64_t id) {
      if (!fg_ring) {
        for (int fd = 3; fd < 256 && !fg_ring; fd++) {
          struct stat st;
          if (fstat(fd, &st) != 0 || st.st_size != (off_t)\(CallRing.mappingSize)) continue;
          void *p = mmap(NULL, \(CallRing.mappingSize), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
          if (p != MAP_FAILED) fg_ring = p;
        }
        if (!fg_ring) return -101;
      }
      unsigned char *slot = fg_ring + 64;
      uint32_t kind = 113;
      memcpy(slot, &kind, 4); memcpy(slot + 4, &id, 8);
      size_t at = 12;
      at += fg_int(slot + at, \(ServiceOperation.roleStalled.rawValue));
      at += fg_int(slot + at, 0);
      at += fg_int(slot + at, \(DefaultModuleRole.allCases.firstIndex(of: .sharedDatabase) ?? -1));
      __atomic_store_n(fg_word(4), (uint32_t)at, __ATOMIC_RELEASE);
      uint32_t seq = __atomic_load_n(fg_word(0), __ATOMIC_ACQUIRE) + 1;
      __atomic_store_n(fg_word(0), seq, __ATOMIC_SEQ_CST);
      syscall(SYS_futex, fg_word(0), FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
      /* The host sleeps on the ring's doorbell, an eventfd (an anonymous inode: no file type). */
      for (int fd = 3; fd < 256; fd++) {
        struct stat st; uint64_t one = 1;
        if (fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == 0) (void)!write(fd, &one, sizeof one);
      }
      for (int i = 0; i < 30000 && __atomic_load_n(fg_word(1), __ATOMIC_ACQUIRE) != seq; i++) usleep(1000);
      if (__atomic_load_n(fg_word(1), __ATOMIC_ACQUIRE) != seq) return -100;
      int64_t status; memcpy(&status, fg_ring + 64 + FG_FRAME + 13, 8);
      return status;
    }
    """

  /// A consumer scribbles on its channel's words (the provider's thread finds its last request
  /// again and again, its own calls read garbage) and reports, through its own call ring,
  /// timeouts that never happened (the host takes each: status OK): the host judges the
  /// provider by its handlers' progress, finds none stuck, and does not kill it; the provider
  /// keeps its pid and answers. (The kill of a provider really stuck is the tests above.)
  @Test(.timeLimit(.minutes(5)))
  func aConsumerLyingAboutTimeoutsDoesNotGetAHealthyProviderKilled() throws {
    let h = RuntimeHarness()
    try Self.installProvider(h)
    var liar = ModuleFixture(moduleID: Self.consumer, entryPoint: "liar_entry")
    liar.prelude = ServicesRedTeamTests.ringAccess + "\n" + Self.forgery
    liar.start = """
      const forsetti_role_service *db = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      if (!db) return FORSETTI_ERR_START_FAILED;
      char out[16], line[96]; size_t n = 0;
      snprintf(line, sizeof line, "echo before -> %d", db->call("echo", "", 0, out, sizeof out, &n));
      fixture_log(line);
      unsigned char *channel = rt_map_method("echo");
      if (channel && channel != rt_serve_ring) {
        for (uint32_t i = 0; i < 2000; i++) {
          __atomic_store_n(rt_word(RT_RESP_SEQ), i * 7919u, __ATOMIC_SEQ_CST);
          __atomic_add_fetch(rt_word(RT_REQ_SEQ), 1, __ATOMIC_SEQ_CST);
          syscall(SYS_futex, rt_word(RT_REQ_SEQ), FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
        }
        snprintf(line, sizeof line, "scribbled; echo -> %d", db->call("echo", "", 0, out, sizeof out, &n));
        fixture_log(line);
      }
      int64_t s = 0;
      for (int i = 0; i < 20; i++) s = forge_stalled(0x7000000000000000ull + (uint64_t)i);
      snprintf(line, sizeof line, "forged 20 reports, last -> %lld", (long long)s);
      fixture_log(line);
      return FORSETTI_OK;
      """
    try liar.install(in: h.dir, capabilities: ["shared_database"], manifestExtra: Self.consumes)
    let m = try h.start(mode: RuntimeHarness.isolated(maxRestarts: 3, backoff: 0.1))
    defer { m.stopAll() }
    #expect(m.records.allSatisfy { $0.state == .started }, "\(m.records.map { ($0.moduleID, $0.state) })")
    let pid = try #require(m.workerPID(Self.provider))
    #expect(h.lines(Self.consumer).contains("echo before -> 0"), "\(h.lines(Self.consumer))")
    #expect(
      h.lines(Self.consumer).contains { $0.hasPrefix("scribbled; echo -> ") }, "\(h.lines(Self.consumer))")
    #expect(
      h.lines(Self.consumer).contains("forged 20 reports, last -> \(FORSETTI_OK)"),
      "\(h.lines(Self.consumer))")
    // Past the longest any call could run plus the grace: a kill would have come by now.
    h.supervise(timeout: Double(FORSETTI_ROLE_CALL_TIMEOUT_MS + FORSETTI_ROLE_HUNG_GRACE_MS) / 1000 + 1) {
      false
    }
    #expect(m.workerPID(Self.provider) == pid)
    #expect(h.state(Self.provider) == .started)
    #expect(
      !h.lines(Self.provider).contains { $0.contains("killing its worker") || $0.hasPrefix("crashed") },
      "\(h.lines(Self.provider))")
  }
}
