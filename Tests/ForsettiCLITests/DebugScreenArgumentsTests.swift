import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

/// What once killed the host from the debug page — a verb's help POSTed to `/api` — now with
/// the typed requests the page sends: every verb, with fields missing, of the wrong type or
/// unknown, gets an answer (a refusal naming the field) and the host keeps answering.
@Suite(.onTestThreads) struct DebugScreenArgumentsTests {
  let dir = TemporaryDirectory("ui-arguments")

  @Test(.timeLimit(.minutes(5))) func badRequestsThroughTheAPINeverStopTheHost() throws {
    var f = ModuleFixture(moduleID: "com.test.one", entryPoint: "one_entry")
    f.start = "fixture_log(\"one up\"); return FORSETTI_OK;"
    try f.install(in: dir)
    let (host, port, token, me) = try DebugScreenTests.launch(in: dir, for: 600)
    defer { host.stop() }

    func api(_ body: String) throws -> (status: Int, text: String) {
      try DebugScreenTests.exchange(
        port, DebugScreenTests.request("POST", "/api", host: me, token: token, csrf: true, body: body),
        readTimeout: 90)
    }
    // Positive control: the answer the host gives while it runs.
    let running = #""running":true"#
    let alive = try api(#"{"verb":"status"}"#)
    #expect(alive.status == 200 && alive.text.contains(running), "\(alive.text)")

    for verb in ControlRequest.verbs.sorted() {
      for body in [
        #"{"verb":"V"}"#, #"{"verb":"V","module":7}"#, #"{"verb":"V","bogus":1}"#,
        #"{"verb":"V","arguments":["--help"]}"#, #"{"verb":"V","module":"com.test.nope"}"#,
      ] {
        let r = try api(body.replacingOccurrences(of: #""V""#, with: "\"\(verb)\""))
        #expect([200, 400].contains(r.status), "\(verb) \(body): HTTP \(r.status)\n\(r.text.suffix(400))")
        if body.contains("arguments") && ["status", "list", "surface"].contains(verb) {
          #expect(
            r.status == 400 && r.text.contains(#"\"arguments\" is not a field of \#(verb)"#), "\(r.text)")
        }
        #expect(host.process.isRunning, "the host stopped after \(verb) \(body)")
      }
      // After each verb, the host still answers, running.
      let after = try api(#"{"verb":"status"}"#)
      #expect(after.status == 200 && after.text.contains(running), "after \(verb): \(after.text)")
    }
    #expect(!host.lines.contains { $0.contains("Fatal error") }, "\(host.lines.suffix(20))")
  }
}
