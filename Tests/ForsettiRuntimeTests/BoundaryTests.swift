import CForsetti
import ForsettiCore
import ForsettiRuntime
import ForsettiTestSupport
import Foundation
import Testing

/// What a sloppy or hostile module can pass through the host table.
@Suite(.onTestThreads) struct BoundaryTests {
  @Test func hugeLengthsBadFlagsAndFilesInTheWayAreRefused() throws {
    let h = RuntimeHarness()
    var f = ModuleFixture(moduleID: "com.test.sloppy", entryPoint: "sloppy_entry")
    f.prelude =
      "static int results[6]; int b0(void){return results[0];} int b1(void){return results[1];} int b2(void){return results[2];}"
      + "int b3(void){return results[3];} int b4(void){return results[4];} int b5(void){return results[5];}"
    f.start = """
      const forsetti_storage *s = host->resolve(FORSETTI_SERVICE_STORAGE);
      char buf[8]; size_t n = 0;
      s->set("k", "value", 5);
      results[0] = s->set("k", "x", (size_t)-1);
      results[1] = s->get("k", buf, (size_t)-1, &n);
      results[2] = s->open_file("f.txt", FORSETTI_OPEN_READ | FORSETTI_OPEN_TRUNCATE);
      results[3] = s->open_file("f.txt", FORSETTI_OPEN_READ | 0x4000);
      int fd = s->open_file("plain", FORSETTI_OPEN_WRITE | FORSETTI_OPEN_CREATE); if (fd >= 0) close(fd);
      results[4] = s->make_directory("plain");
      results[5] = (int)n;
      return FORSETTI_OK;
      """
    let so = try f.install(in: h.dir, capabilities: ["storage"])
    try h.start()
    #expect(h.call(so, "b0") == FORSETTI_ERR_INVALID_ARGUMENT)
    #expect(h.call(so, "b1") == FORSETTI_OK)
    #expect(h.call(so, "b5") == 5)
    #expect(h.call(so, "b2") == FORSETTI_ERR_INVALID_ARGUMENT)
    #expect(h.call(so, "b3") == FORSETTI_ERR_INVALID_ARGUMENT)
    #expect(h.call(so, "b4") == FORSETTI_ERR_INVALID_ARGUMENT)
    #expect(
      try String(contentsOfFile: h.dir.url("state/sandboxes/com.test.sloppy/.kv/k"), encoding: .utf8)
        == "value")
  }

  @Test func modulesAnsweringEachOtherCannotExhaustTheStack() throws {
    let h = RuntimeHarness()
    var f = ModuleFixture(moduleID: "com.test.echo", entryPoint: "echo_entry")
    f.prelude = """
      static const forsetti_events *g_events;
      static int depth, refused;
      static void again(void *c, const char *s, const char *t, const void *p, size_t n) {
        (void)c; (void)s; (void)t; (void)p; (void)n;
        depth++;
        if (g_events->publish("echo", "", 0) == FORSETTI_ERR_COMMUNICATION_DENIED) refused++;
      }
      int echo_depth(void) { return depth; }
      int echo_refused(void) { return refused; }
      """
    f.start = """
      g_events = host->resolve(FORSETTI_SERVICE_EVENTS);
      g_events->subscribe("echo", again, NULL);
      g_events->publish("echo", "", 0);
      return FORSETTI_OK;
      """
    let so = try f.install(in: h.dir)
    try h.start()
    #expect(h.state("com.test.echo") == .started)
    #expect(h.call(so, "echo_depth") == 16)
    #expect(h.call(so, "echo_refused") == 1)
  }

  @Test func aModuleCannotForgeLogLines() throws {
    let h = RuntimeHarness()
    var f = ModuleFixture(moduleID: "com.test.forger", entryPoint: "forger_entry")
    f.start = """
      host->log(FORSETTI_LOG_INFO, "ok\\ninfo    [host] started com.example.fake 9.9.9");
      host->resolve("x module=com.example.other");
      return FORSETTI_OK;
      """
    try f.install(in: h.dir)
    try h.start()
    let formatted = h.log.all.filter { $0.moduleID == "com.test.forger" }.map(\.formatted)
    #expect(formatted.contains("[module=com.test.forger] ok\\ninfo    [host] started com.example.fake 9.9.9"))
    #expect(formatted.contains { $0.contains("service=\"x module=com.example.other\"") })
    #expect(!formatted.contains { $0.contains("\n") })
  }

  @Test func aNegativeUICountIsRefusedNotTrusted() throws {
    let h = RuntimeHarness()
    var f = ModuleFixture(moduleID: "com.test.uicount", entryPoint: "uicount_entry")
    f.type = "ui"
    f.prelude = """
      static const forsetti_toolbar_item items[] = {{"a", "A", NULL}};
      static const forsetti_ui_contributions ui = { sizeof(forsetti_ui_contributions), items, (size_t)-1, NULL, 0, NULL, 0, NULL, 0, NULL, NULL, 0 };
      """
    f.uiContributions = "&ui"
    try f.install(in: h.dir, capabilities: ["toolbar_items"])
    try h.start()
    #expect(h.state("com.test.uicount") == .failed(.validationFailed))
  }
}
