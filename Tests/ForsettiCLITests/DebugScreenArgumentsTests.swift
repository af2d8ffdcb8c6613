import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

/// What once killed the host from the debug page — `{"verb":"approve","arguments":["--help"]}`
/// POSTed to `/api` — for every verb the page can send, with the arguments that trapped: each
/// gets an answer and the host keeps answering.
@Suite(.onTestThreads) struct DebugScreenArgumentsTests {
  let dir = TemporaryDirectory("ui-arguments")

  @Test(.timeLimit(.minutes(5))) func helpAndBadArgumentsThroughTheAPINeverStopTheHost() throws {
    var f = ModuleFixture(moduleID: "com.test.one", entryPoint: "one_entry")
    f.start = "fixture_log(\"one up\"); return FORSETTI_OK;"
    try f.install(in: dir)
    let (host, port, token, me) = try DebugScreenTests.launch(in: dir, for: 600)
    defer { host.stop() }

    func api(_ verb: String, _ arguments: [String]) throws -> (status: Int, text: String) {
      let body = JSONWriter.string(
        .object(JSONObject([("verb", .string(verb)), ("arguments", .array(arguments.map { .string($0) }))])))
      return try DebugScreenTests.exchange(
        port, DebugScreenTests.request("POST", "/api", host: me, token: token, csrf: true, body: body),
        readTimeout: 90)
    }
    // Positive control: the answer the host gives while it runs.
    let running = #"\"running\":true"#
    let alive = try api("status", ["--json"])
    #expect(alive.status == 200 && alive.text.contains(running), "\(alive.text)")

    for verb in ControlRequest.verbs.sorted() {
      for arguments in [
        ["--help"], ["-h"], ["--version"], [], ["--bogus"], ["a", "b", "c", "d"], ["--", "-h"],
      ] {
        let r = try api(verb, arguments)
        #expect(r.status == 200, "\(verb) \(arguments): HTTP \(r.status)\n\(r.text.suffix(400))")
        if arguments == ["--help"] || arguments == ["-h"] {
          #expect(
            r.text.contains("USAGE: forsetti-host \(verb)"), "\(verb) \(arguments): \(r.text.suffix(400))")
        }
        #expect(host.process.isRunning, "the host stopped after \(verb) \(arguments)")
      }
      // After each verb, the host still answers, running.
      let after = try api("status", ["--json"])
      #expect(after.status == 200 && after.text.contains(running), "after \(verb): \(after.text)")
    }
    // The help changed nothing: the module still runs as it did.
    #expect(!host.lines.contains { $0.contains("Fatal error") }, "\(host.lines.suffix(20))")
  }
}
