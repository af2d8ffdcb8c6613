import ForsettiTestSupport
import Foundation
import Testing

/// Role calls under contention through a real `forsetti-host run`, as root and as an
/// unprivileged user (issue 25): a consumer's other host calls flow while its call of a hung
/// provider waits, the hung provider is killed and restarted, and a call cycle is refused at
/// once. (-11 is FORSETTI_ERR_TIMEOUT, -13 FORSETTI_ERR_CALL_CYCLE, fixed by the ABI.)
@Suite(.onTestThreads) struct RoleCallsAsUsersTests {
  static let consumes =
    #","manifestTemplateVersion":"1.1","runtimeRequirements":{"io":[],"dataIsolation":{"mode":"framework_mediated_shared"}}"#

  /// `hang` publishes `test.hang.entered` from inside the handler, then never returns.
  static var hungProvider: ModuleFixture {
    HungRoleFixtures.provider(moduleID: "com.test.hung", entryPoint: "hung_entry")
  }

  /// Calls `hang` once from a thread; told the provider is inside the handler, publishes 50
  /// events from its delivery thread and says whether the role call was still outstanding.
  static var consumer: ModuleFixture {
    HungRoleFixtures.consumer(moduleID: "com.test.waiter", entryPoint: "waiter_entry", times: 1)
  }

  @Test(.timeLimit(.minutes(5)), arguments: HostileHost.Identity.allCases)
  func aHungProviderIsKilledAndRestartedWhileItsConsumerKeepsCallingTheHost(
    as identity: HostileHost.Identity
  ) throws {
    let host = HostileHost(identity)
    try #require(host.isAvailable, "running as another user needs root")
    try Self.hungProvider.install(
      in: host.dir, capabilities: ["shared_database"],
      manifestExtra: #","defaultModuleRole":"shared_database""#, ccFlags: ["-D_GNU_SOURCE"])
    try Self.consumer.install(
      in: host.dir, capabilities: ["shared_database"], manifestExtra: Self.consumes,
      ccFlags: ["-D_GNU_SOURCE"])
    // Stopped as soon as the provider is being restarted: the time is only an upper bound.
    let run = try host.run(for: 120, stopWhen: { $0.contains("restarting com.test.hung") })
    let waiter = run.lines("com.test.waiter")
    #expect(waiter.contains("published 50 of 50; call outstanding=1"), "\(waiter)")
    // Positive control: the call did end, so "outstanding" could have read 0.
    #expect(waiter.contains("hang -> -11"), "\(waiter)")
    let hung = run.lines("com.test.hung")
    #expect(hung.contains { $0.hasPrefix("hung: ") && $0.contains("killing its worker") }, "\(run.output)")
    #expect(hung.contains { $0.hasPrefix("crashed: hung: ") }, "\(hung)")
    #expect(run.output.contains("restarting com.test.hung"), "\(run.output)")
  }

  /// A serves shared_database and calls authentication; B the other way round. The consumer
  /// calls A, A's handler calls B, B's handler calls A: refused at once (-13), so A answers.
  static func member(_ id: String, _ entry: String, servesID: String, callsID: String) -> ModuleFixture {
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.prelude = """
      static const forsetti_role_service *mine, *theirs;
      static forsetti_status handle(void *ctx, const char *caller, const char *method, const void *req,
                                    size_t len, void *resp, size_t cap, size_t *rlen) {
        (void)ctx; (void)method; (void)req; (void)len;
        char inner[64]; size_t n = 0;
        forsetti_status s = theirs->call("cycle", "", 0, inner, sizeof inner, &n);
        char l[200]; snprintf(l, sizeof l, "from %s: inner %d", caller, s); fixture_log(l);
        int w = snprintf(resp, cap, "%d", s);
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

  @Test(.timeLimit(.minutes(5)), arguments: HostileHost.Identity.allCases)
  func aCallCycleIsRefusedAtOnce(as identity: HostileHost.Identity) throws {
    let host = HostileHost(identity)
    try #require(host.isAvailable, "running as another user needs root")
    let roles =
      #","manifestTemplateVersion":"1.1","runtimeRequirements":{"io":[],"dataIsolation":{"mode":"private_to_module","ownedStoreIDs":["s"],"requiredDefaultRoles":["ROLE"]}}"#
    try Self.member(
      "com.test.a", "a_entry", servesID: "forsetti.role.shared_database",
      callsID: "forsetti.role.authentication"
    ).install(
      in: host.dir, capabilities: ["shared_database", "authentication"],
      manifestExtra: #","defaultModuleRole":"shared_database""#
        + roles.replacingOccurrences(of: "ROLE", with: "authentication"), ccFlags: ["-D_GNU_SOURCE"])
    try Self.member(
      "com.test.b", "b_entry", servesID: "forsetti.role.authentication",
      callsID: "forsetti.role.shared_database"
    ).install(
      in: host.dir, capabilities: ["shared_database", "authentication"],
      manifestExtra: #","defaultModuleRole":"authentication""#
        + roles.replacingOccurrences(of: "ROLE", with: "shared_database"), ccFlags: ["-D_GNU_SOURCE"])
    var c = ModuleFixture(moduleID: "com.test.caller", entryPoint: "caller_entry")
    c.prelude = """
      #include <pthread.h>
      static const forsetti_role_service *g_db;
      static pthread_t g_thread;
      static void *go(void *arg) {
        (void)arg; char out[64], line[128]; size_t n = 0;
        usleep(300000);
        forsetti_status s = g_db->call("cycle", "", 0, out, sizeof out - 1, &n);
        out[s == FORSETTI_OK ? n : 0] = 0;
        snprintf(line, sizeof line, "cycle -> %d %s", s, out); fixture_log(line);
        return NULL;
      }
      """
    c.start = """
      g_db = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      return g_db && pthread_create(&g_thread, NULL, go, NULL) == 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    try c.install(
      in: host.dir, capabilities: ["shared_database"], manifestExtra: Self.consumes,
      ccFlags: ["-D_GNU_SOURCE"])
    let run = try host.run(for: 60, stopWhen: { $0.contains("cycle -> ") })
    // The status, not the time: B's call of A was refused as a cycle; A's answer carries it.
    #expect(run.lines("com.test.b").contains("from com.test.a: inner -13"), "\(run.output)")
    #expect(run.lines("com.test.a").contains("from com.test.caller: inner 0"), "\(run.output)")
    #expect(run.lines("com.test.caller").contains("cycle -> 0 0"), "\(run.output)")
  }
}
