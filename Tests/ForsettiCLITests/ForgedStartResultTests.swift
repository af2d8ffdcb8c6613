import ForsettiTestSupport
import Foundation
import Testing

/// A module whose thread writes the worker's `startResult(FORSETTI_OK)` itself on the worker's
/// socket while its `start` never returns gets no more time than a module whose `start` simply
/// hangs: both end `startTimedOut`, their workers killed (`confirmStart` in `WorkerProtocol.swift`).
/// Before, the forged frame was taken as the answer and the module ran as started for as long as
/// the host did. Against a real `forsetti-host run`, as root and as an unprivileged user.
@Suite(.onTestThreads, .serialized) struct ForgedStartResultTests {
  /// Its `start` starts a thread that forges the frame, then never returns; `honest` only never
  /// returns.
  static func hanging(_ id: String, forging: Bool) -> ModuleFixture {
    var f = ModuleFixture(moduleID: id, entryPoint: id.replacingOccurrences(of: ".", with: "_") + "_entry")
    f.prelude = """
      #include <stdint.h>
      #include <pthread.h>
      #include <sys/socket.h>
      /// startResult (103), id 0, one integer value (tag 1): FORSETTI_OK, as the worker writes it.
      static void *forge(void *a) {
        (void)a;
        unsigned char f[21]; uint32_t kind = 103; uint64_t id = 0; int64_t ok = FORSETTI_OK;
        memcpy(f, &kind, 4); memcpy(f + 4, &id, 8); f[12] = 1; memcpy(f + 13, &ok, 8);
        fixture_log(send(3, f, sizeof f, MSG_NOSIGNAL) == (ssize_t)sizeof f ? "forged startResult sent" : "forging failed");
        return NULL;
      }
      """
    f.start =
      (forging ? "pthread_t t; pthread_create(&t, NULL, forge, NULL); pthread_detach(t);\n" : "")
      + "fixture_log(\"start hangs\"); for (;;) pause(); return FORSETTI_OK;"
    return f
  }

  @Test(arguments: HostileHost.Identity.allCases)
  func aForgedStartResultGetsNoMoreTimeThanAHangingStart(as identity: HostileHost.Identity) throws {
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    try h.install(Self.hanging("com.hostile.forger", forging: true))
    try h.install(Self.hanging("com.hostile.hanger", forging: false))
    var healthy = ModuleFixture(moduleID: "com.healthy.neighbour", entryPoint: "neighbour_entry")
    healthy.start = "fixture_log(\"healthy up\"); return FORSETTI_OK;"
    try h.install(healthy)
    // Errors go to standard error.
    let errors = h.dir.url("host-errors.txt")
    let run = try h.run(
      for: 120, extraArguments: ["--start-timeout", "5"],
      ready: {
        let text = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
        return ["com.hostile.forger", "com.hostile.hanger"].allSatisfy { text.contains("[module=\($0)] ") }
      },
      observe: { host in
        kill(host, SIGTERM)
        return [:]
      })
    #expect(run.observed != nil, "\(run.output)")
    // The forger did write its frame, while its start ran: the attack happened.
    #expect(run.lines("com.hostile.forger").contains("forged startResult sent"), "\(run.output)")
    #expect(run.lines("com.hostile.forger").contains("start hangs"), "\(run.output)")
    // Both are judged alike: start timed out, worker killed; neither was ever started.
    for id in ["com.hostile.forger", "com.hostile.hanger"] {
      #expect(
        run.lines(id).contains { $0.hasPrefix("startTimedOut at start: start did not finish within 5.0 s") },
        "\(id): \(run.output)")
      #expect(!run.hostLines.contains { $0.contains("started \(id) ") }, "\(id): \(run.hostLines)")
    }
    #expect(
      run.lines("com.hostile.forger").contains {
        $0.contains("a startResult came, but the worker's main thread never returned from start")
          && $0.hasSuffix("the worker was killed")
      }, "\(run.output)")
    // The positive control: a module that returns from start is started beside them.
    #expect(run.lines("com.healthy.neighbour").contains("healthy up"), "\(run.output)")
    #expect(run.hostLines.contains { $0.contains("started com.healthy.neighbour ") }, "\(run.hostLines)")
  }
}
