import CForsetti
import ForsettiBinary
import ForsettiBridge
import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

@testable import ForsettiRuntime

/// forsetti/services/diagnostics.h with real modules, in the host and in a worker: the host
/// keeps the latest report of each running module, refuses what breaks the limits, and forgets
/// it all when the module stops.
@Suite(.onTestThreads) struct DiagnosticsTests {
  /// A module that calls `steps` in `start` (`rep(label, health, summary)`,
  /// `cnt(label, name, value)`) and logs each status as `LABEL r=STATUS`.
  static func reporter(_ steps: String, id: String = "com.test.reporter") -> ModuleFixture {
    var f = ModuleFixture(moduleID: id, entryPoint: "reporter_entry")
    f.prelude = """
      static const forsetti_diagnostics *g_d;
      static void say(const char *label, int r) {
        char line[200]; snprintf(line, sizeof line, "%s r=%d", label, r); fixture_log(line);
      }
      static void rep(const char *label, int32_t health, const char *summary) { say(label, g_d->report(health, summary)); }
      static void cnt(const char *label, const char *name, int64_t v) { say(label, g_d->set_counter(name, v)); }
      """
    f.start = """
      g_d = host->resolve(FORSETTI_SERVICE_DIAGNOSTICS);
      if (!g_d) { fixture_log("resolve=NULL"); return FORSETTI_OK; }
      \(steps)
      fixture_log("reports done");
      return FORSETTI_OK;
      """
    return f
  }

  @Test(arguments: [false, true])
  func theLatestReportIsKeptWhileTheModuleRunsAndForgottenWhenItStops(isolated: Bool) throws {
    let h = RuntimeHarness()
    try Self.reporter(
      """
      rep("first", FORSETTI_HEALTH_OK, "all good");
      rep("latest", FORSETTI_HEALTH_DEGRADED, "queue backing up");
      cnt("depth", "queue.depth", 12);
      cnt("depth2", "queue.depth", 42);
      cnt("errors", "io_errors-total", -3);
      rep("badhealth", 3, NULL);
      rep("neghealth", -1, NULL);
      { char big[300]; memset(big, 'x', 299); big[299] = 0; rep("bigsummary", FORSETTI_HEALTH_OK, big); }
      rep("notutf8", FORSETTI_HEALTH_OK, "\\xff\\xfe");
      cnt("emptyname", "", 1);
      cnt("badname", "a b", 1);
      cnt("slashname", "../x", 1);
      { char big[70]; memset(big, 'n', 65); big[65] = 0; cnt("longname", big, 1); }
      for (int i = 0; i < 30; i++) { char n[16]; snprintf(n, sizeof n, "c%d", i); cnt("fill", n, i); }
      cnt("thirtythird", "one.too.many", 1);
      cnt("existing", "queue.depth", 43);
      """
    ).install(in: h.dir, capabilities: ["diagnostics"])
    let m = try h.start(mode: isolated ? RuntimeHarness.isolated() : .inProcess)
    #expect(h.waitForLine("com.test.reporter") { $0 == "reports done" } != nil, "\(h.log.all.map(\.message))")
    let lines = h.lines("com.test.reporter")
    func status(_ label: String) -> String? {
      lines.first { $0.hasPrefix(label + " r=") }.map { String($0.dropFirst(label.count + 3)) }
    }
    for label in ["first", "latest", "depth", "depth2", "errors", "existing"] {
      #expect(status(label) == "0")
    }
    for label in ["badhealth", "neghealth", "notutf8", "emptyname", "badname", "slashname", "longname"] {
      #expect(status(label) == "\(FORSETTI_ERR_INVALID_ARGUMENT)", "\(label)")
    }
    #expect(status("bigsummary") == "\(FORSETTI_ERR_TOO_LARGE)")
    #expect(status("thirtythird") == "\(FORSETTI_ERR_TOO_LARGE)")

    let health = try #require(m.environment.services.reportedHealth["com.test.reporter"])
    #expect(health.status == .degraded)
    #expect(health.summary == "queue backing up")
    #expect(health.counters["queue.depth"] == 43)
    #expect(health.counters["io_errors-total"] == -3)
    #expect(health.counters.count == 32)
    #expect(health.counters["one.too.many"] == nil)

    m.stopAll()
    #expect(m.environment.services.reportedHealth["com.test.reporter"] == nil)
  }

  @Test(arguments: [false, true])
  func withoutTheCapabilityTheServiceDoesNotResolve(isolated: Bool) throws {
    let h = RuntimeHarness()
    try Self.reporter(#"rep("x", 0, "fine");"#).install(in: h.dir, capabilities: ["storage"])
    let m = try h.start(mode: isolated ? RuntimeHarness.isolated() : .inProcess)
    defer { m.stopAll() }
    #expect(h.waitForLine("com.test.reporter") { $0 == "resolve=NULL" } != nil)
    #expect(m.environment.services.reportedHealth.isEmpty)
  }

  /// The host checks the grant it holds, whatever a worker's frame claims.
  @Test func aCallerWithoutTheGrantIsDenied() throws {
    let dir = TemporaryDirectory("diagnostics-denied")
    let services = HostServices(stateDirectory: dir.url("state"), exportDirectory: nil, log: MemoryLogSink())
    let report = ServiceRequest(.diagnosticsReport, number: 1, [Array("claim".utf8)])
    let counter = ServiceRequest(.diagnosticsCounter, number: 7, [Array("n".utf8)])
    let stranger = ModuleCaller(moduleID: "com.test.x", granted: [.storage, .fileExport])
    #expect(services.answer(report, from: stranger).status == FORSETTI_ERR_DENIED)
    #expect(services.answer(counter, from: stranger).status == FORSETTI_ERR_DENIED)
    #expect(services.reportedHealth.isEmpty)
    let granted = ModuleCaller(moduleID: "com.test.x", granted: [.diagnostics])
    #expect(services.answer(report, from: granted).status == FORSETTI_OK)
    #expect(services.reportedHealth["com.test.x"]?.status == .degraded)
  }
}
