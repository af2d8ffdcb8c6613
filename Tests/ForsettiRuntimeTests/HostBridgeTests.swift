import CForsetti
import ForsettiCore
import ForsettiRuntime
import ForsettiTestSupport
import Foundation
import Testing

/// The capability-scoped host table: what a module can reach, as whom, and until when.
@Suite(.onTestThreads) struct HostBridgeTests {
  @Test func ungrantedAndUnknownServicesAreNullWithAWarning() throws {
    let h = RuntimeHarness()
    var f = ModuleFixture(moduleID: "com.test.nocaps", entryPoint: "nocaps_entry")
    f.prelude =
      "static int r_storage = -1, r_telemetry = -1, r_unknown = -1, r_events = -1;"
      + "int got_storage(void) { return r_storage; } int got_telemetry(void) { return r_telemetry; }"
      + "int got_unknown(void) { return r_unknown; } int got_events(void) { return r_events; }"
    f.start = """
      r_storage = host->resolve(FORSETTI_SERVICE_STORAGE) != NULL;
      r_telemetry = host->resolve(FORSETTI_SERVICE_TELEMETRY) != NULL;
      r_unknown = host->resolve("forsetti.camera") != NULL;
      r_events = host->resolve(FORSETTI_SERVICE_EVENTS) != NULL;
      return FORSETTI_OK;
      """
    let so = try f.install(in: h.dir, capabilities: ["telemetry"])
    try h.start()
    #expect(h.state("com.test.nocaps") == .started)
    #expect(h.call(so, "got_storage") == 0)
    #expect(h.call(so, "got_telemetry") == 1)
    #expect(h.call(so, "got_unknown") == 0)
    #expect(h.call(so, "got_events") == 1)
    let warnings = h.log.all.filter { $0.level == .warning && $0.moduleID == "com.test.nocaps" }.map(
      \.message)
    #expect(warnings.contains { $0.contains("forsetti.storage needs capability storage") })
    #expect(warnings.contains { $0.contains("unknown service \"forsetti.camera\"") })
    #expect(warnings.count == 2)
  }

  @Test func callsAfterStopReturnRevoked() throws {
    let h = RuntimeHarness()
    var f = ModuleFixture(moduleID: "com.test.late", entryPoint: "late_entry")
    f.prelude = """
      static const forsetti_storage *g_storage;
      static const forsetti_events *g_events;
      int late_set(void) { return g_storage->set("k", "v", 1); }
      int late_publish(void) { return g_events->publish("late.event", "x", 1); }
      int late_resolve_is_null(void) { return g_host->resolve(FORSETTI_SERVICE_STORAGE) == NULL; }
      int late_log(void) { g_host->log(FORSETTI_LOG_INFO, "after stop"); return 0; }
      """
    f.start = """
      g_storage = host->resolve(FORSETTI_SERVICE_STORAGE);
      g_events = host->resolve(FORSETTI_SERVICE_EVENTS);
      return g_storage && g_events ? g_storage->set("k", "before", 6) : FORSETTI_ERR_START_FAILED;
      """
    let so = try f.install(in: h.dir, capabilities: ["storage"])
    let m = try h.start()
    #expect(h.state("com.test.late") == .started)
    #expect(h.call(so, "late_set") == FORSETTI_OK)
    m.stopAll()
    #expect(h.call(so, "late_set") == FORSETTI_ERR_REVOKED)
    #expect(h.call(so, "late_publish") == FORSETTI_ERR_REVOKED)
    #expect(h.call(so, "late_resolve_is_null") == 1)
    _ = h.call(so, "late_log")
    #expect(!h.lines("com.test.late").contains("after stop"))
    // The value written before stop is still there: stopping keeps sandbox data.
    let stored = try String(contentsOfFile: h.dir.url("state/sandboxes/com.test.late/.kv/k"), encoding: .utf8)
    #expect(stored == "v")
  }

  static func receiver() -> ModuleFixture {
    var r = ModuleFixture(moduleID: "com.test.areceiver", entryPoint: "receiver_entry")
    r.prelude = """
      static char last_sender[128], last_event_source[128], last_payload[128];
      static int messages_seen, events_seen;
      static void on_message(void *c, const char *sender, const char *type, const void *p, size_t n) {
        (void)c; (void)type; messages_seen++;
        snprintf(last_sender, sizeof last_sender, "%s", sender);
        snprintf(last_payload, sizeof last_payload, "%.*s", (int)n, (const char *)p);
      }
      static void on_event(void *c, const char *source, const char *type, const void *p, size_t n) {
        (void)c; (void)type; (void)p; (void)n; events_seen++;
        snprintf(last_event_source, sizeof last_event_source, "%s", source);
      }
      const char *receiver_sender(void) { return last_sender; }
      const char *receiver_event_source(void) { return last_event_source; }
      const char *receiver_payload(void) { return last_payload; }
      int receiver_messages(void) { return messages_seen; }
      int receiver_events(void) { return events_seen; }
      """
    r.start = """
      const forsetti_messages *m = host->resolve(FORSETTI_SERVICE_MESSAGES);
      const forsetti_events *e = host->resolve(FORSETTI_SERVICE_EVENTS);
      if (!m || !e) return FORSETTI_ERR_START_FAILED;
      m->set_handler(on_message, NULL);
      return e->subscribe("test.ping", on_event, NULL) > 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    return r
  }

  @Test func eventsAndMessagesCarryTheBoundSender() throws {
    let h = RuntimeHarness()
    let rso = try Self.receiver().install(in: h.dir)
    var s = ModuleFixture(moduleID: "com.test.bsender", entryPoint: "sender_entry")
    s.prelude =
      "static int r_send, r_self, r_reserved, r_empty, r_publish, r_nobody;"
      + "int sender_result(int i) { int r[] = {r_send, r_self, r_reserved, r_empty, r_publish, r_nobody}; return r[i]; }"
      + "int s0(void){return sender_result(0);} int s1(void){return sender_result(1);} int s2(void){return sender_result(2);}"
      + "int s3(void){return sender_result(3);} int s4(void){return sender_result(4);} int s5(void){return sender_result(5);}"
    s.start = """
      const forsetti_messages *m = host->resolve(FORSETTI_SERVICE_MESSAGES);
      const forsetti_events *e = host->resolve(FORSETTI_SERVICE_EVENTS);
      r_send = m->send("com.test.areceiver", "greeting", "hello", 5);
      r_self = m->send("com.test.bsender", "greeting", "me", 2);
      r_reserved = m->send("com.test.areceiver", "forsetti.internal.shutdown", "", 0);
      r_empty = m->send("", "greeting", "", 0);
      r_publish = e->publish("test.ping", "p", 1);
      r_nobody = m->send("com.test.nobody", "greeting", "", 0);
      return FORSETTI_OK;
      """
    let sso = try s.install(in: h.dir)
    let m = try h.start()
    #expect(h.state("com.test.areceiver") == .started)
    #expect(h.state("com.test.bsender") == .started)
    #expect(h.call(sso, "s0") == FORSETTI_OK)
    #expect(h.call(sso, "s1") == FORSETTI_ERR_COMMUNICATION_DENIED)
    #expect(h.call(sso, "s2") == FORSETTI_ERR_COMMUNICATION_DENIED)
    #expect(h.call(sso, "s3") == FORSETTI_ERR_COMMUNICATION_DENIED)
    #expect(h.call(sso, "s4") == FORSETTI_OK)
    #expect(h.call(sso, "s5") == FORSETTI_ERR_NOT_FOUND)
    #expect(h.string(rso, "receiver_sender") == "com.test.bsender")
    #expect(h.string(rso, "receiver_payload") == "hello")
    #expect(h.call(rso, "receiver_messages") == 1)
    #expect(h.call(rso, "receiver_events") == 1)
    #expect(h.string(rso, "receiver_event_source") == "com.test.bsender")
    let denials = h.lines("com.test.bsender").filter { $0.hasPrefix("moduleCommunicationDenied") }
    #expect(denials.count == 3)
    #expect(m.environment.events.subscriptionCount(moduleID: "com.test.areceiver") == 1)
    m.stopAll()
    #expect(m.environment.events.subscriptionCount(moduleID: "com.test.areceiver") == 0)
  }

  @Test func overwritingTheHostTableIdentitySpoofsNobody() throws {
    let h = RuntimeHarness()
    let rso = try Self.receiver().install(in: h.dir)
    var s = ModuleFixture(moduleID: "com.test.cspoofer", entryPoint: "spoofer_entry")
    s.prelude =
      "static int r_pointer, r_bytes; int spoof_pointer(void){return r_pointer;} int spoof_bytes(void){return r_bytes;}"
    s.start = """
      const forsetti_messages *m = host->resolve(FORSETTI_SERVICE_MESSAGES);
      forsetti_host *writable = (forsetti_host *)host;
      const char *mine = writable->module_id;
      writable->module_id = "com.test.areceiver";
      r_pointer = m->send("com.test.areceiver", "greeting", "forged", 6);
      writable->module_id = mine;
      strcpy((char *)mine, "com.test.dvictim");
      r_bytes = m->send("com.test.areceiver", "greeting", "forged", 6);
      return FORSETTI_OK;
      """
    let sso = try s.install(in: h.dir)
    try h.start()
    #expect(h.call(sso, "spoof_pointer") == FORSETTI_ERR_DENIED)
    #expect(h.call(sso, "spoof_bytes") == FORSETTI_ERR_DENIED)
    #expect(h.call(rso, "receiver_messages") == 0)
    let spoofs = h.lines("com.test.cspoofer").filter { $0.hasPrefix("moduleIdentitySpoofingDenied") }
    #expect(spoofs.count == 2)
  }
}
