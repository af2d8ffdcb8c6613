import ForsettiTestSupport
import Foundation
import Testing

/// A hostile module writes every character the module-text rule names, and a forged host line,
/// through its log call, its standard output and error, its health report, its telemetry and a
/// crash, under a real `forsetti-host run` as root and as uid 65534. Each place an operator
/// reads shows every character escaped and none raw, and each line of module text carries the
/// module's ID: `run`'s output, `host.log`, `telemetry.jsonl`, `list` and `explain` (text and
/// JSON). The debug page is `DebugScreenBrowserTests`.
@Suite(.onTestThreads) struct ModuleTextEverywhereTests {
  static let id = "com.test.hostile"
  static let crashID = "com.test.hostile.crash"
  static let uiID = "com.test.hostile.ui"
  /// Between a command's standard output and error in what `observe` keeps.
  static let stderrMark = "\n--- stderr ---\n"

  /// Every character's escape appears in `text`.
  static func expectEveryEscape(
    in text: String, _ place: String, sourceLocation: SourceLocation = #_sourceLocation
  ) {
    let missing = HostileText.scalars.map(HostileText.shown).filter { !text.contains($0) }
    #expect(missing.isEmpty, "\(place): missing escapes \(missing)", sourceLocation: sourceLocation)
    #expect(
      text.contains(HostileText.escaped), "\(place): the whole text escaped", sourceLocation: sourceLocation)
  }

  /// No character of the rule appears raw in `text` (LF only as its own line ends).
  static func expectNoneRaw(
    in text: String, _ place: String, sourceLocation: SourceLocation = #_sourceLocation
  ) {
    let raw = HostileText.raw(in: text)
    #expect(raw.isEmpty, "\(place): raw \(Set(raw).sorted())", sourceLocation: sourceLocation)
  }

  /// Every line showing the forged text names a module of ours before it: none passes for the host's.
  static func expectForgedLinesMarked(
    in text: String, _ place: String, sourceLocation: SourceLocation = #_sourceLocation
  ) {
    let lines = text.split(separator: "\n").filter { $0.contains(HostileText.forged) }
    #expect(!lines.isEmpty, "\(place): the forged text is shown", sourceLocation: sourceLocation)
    for line in lines {
      let forged = line.range(of: HostileText.forged)?.lowerBound ?? line.startIndex
      #expect(line[..<forged].contains(id), "\(place): \(line)", sourceLocation: sourceLocation)
      #expect(
        !line.hasPrefix(HostileText.forged) && !line.contains("[host]"), "\(place): \(line)",
        sourceLocation: sourceLocation)
    }
  }

  @Test(arguments: HostileHost.Identity.allCases)
  func everyCharacterIsEscapedInEveryOutput(as identity: HostileHost.Identity) throws {
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    try h.install(HostileText.module(Self.id), capabilities: HostileText.capabilities)
    try h.install(HostileText.crasher(Self.crashID))
    try HostileText.uiModule(Self.uiID).install(
      in: h.dir, capabilities: HostileText.uiCapabilities, manifestExtra: HostileText.uiManifestExtra,
      ccFlags: ["-D_GNU_SOURCE"])
    let state = h.dir.url("state")
    let output = h.dir.url("host-output.txt")
    @Sendable func ask(_ args: [String]) -> String {
      let r = try? h.cli(args + ["--state", state], in: state)
      return "status \(r?.status ?? -1)\n\(r?.stdout ?? "")\(Self.stderrMark)\(r?.stderr ?? "")"
    }
    let run = try h.run(
      for: 60, extraArguments: [],
      ready: {
        let out = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        return out.contains("[module=\(Self.id)] ready") && out.contains("[module=\(Self.id)] hostile #2 ")
          && out.contains("[host] started \(Self.uiID) ")
      },
      observe: { pid in
        var seen: [String: String] = [:]
        seen["list"] = ask(["list"])
        seen["list --json"] = ask(["list", "--json"])
        seen["explain"] = ask(["explain", Self.id])
        seen["explain --json"] = ask(["explain", "--json", Self.id])
        seen["surface"] = ask(["surface"])
        seen["surface --json"] = ask(["surface", "--json"])
        kill(pid, SIGTERM)
        return seen
      })
    #expect(!run.killedByWatchdog, "\(run.output.suffix(2000))")
    let observed = try #require(run.observed, "the module never logged: \(run.output.suffix(3000))")

    // run's standard output and error: the log call, standard output and error, the crash report.
    Self.expectNoneRaw(in: run.stdout, "run stdout")
    Self.expectNoneRaw(in: run.stderr, "run stderr")
    Self.expectEveryEscape(in: run.output, "run output")
    Self.expectForgedLinesMarked(in: run.output, "run output")
    #expect(
      run.output.contains("[module=\(Self.id)] hostile #0 \(HostileText.escaped)"),
      "\(run.output.suffix(3000))")
    #expect(
      run.output.contains("[module=\(Self.id) stream=output] stdout hostile["), "\(run.output.suffix(3000))")
    #expect(run.output.contains("[module=\(Self.crashID)"), "the crash is reported")
    #expect(!run.hostLines.contains { $0.contains(HostileText.forged) }, "\(run.hostLines)")

    // host.log
    let hostLog = (try? String(contentsOfFile: h.dir.url("state/logs/host.log"), encoding: .utf8)) ?? ""
    Self.expectNoneRaw(in: hostLog, "host.log")
    Self.expectEveryEscape(in: hostLog, "host.log")
    Self.expectForgedLinesMarked(in: hostLog, "host.log")

    // telemetry.jsonl: the value kept, its bytes holding none raw.
    let telemetry =
      (try? String(contentsOfFile: h.dir.url("state/logs/telemetry.jsonl"), encoding: .utf8)) ?? ""
    Self.expectNoneRaw(in: telemetry, "telemetry.jsonl")
    let event = try #require(
      telemetry.split(separator: "\n").first { $0.contains("hostile.event") }, "telemetry: \(telemetry)")
    for v in HostileText.scalars {
      #expect(event.contains(HostileText.json(v)), "telemetry: \(HostileText.json(v)) missing in \(event)")
    }
    let decoded = try JSONSerialization.jsonObject(with: Data(event.utf8)) as? [String: Any]
    #expect((decoded?["attributes"] as? [String: Any])?["text"] as? String == HostileText.text)
    #expect(decoded?["module"] as? String == Self.id)

    // list and explain, answered by the running host.
    let list = try #require(observed["list"])
    #expect(list.hasPrefix("status 0"), "\(list)")
    Self.expectNoneRaw(in: list, "list")
    let row = list.split(separator: "\n").first { $0.hasPrefix(Self.id + " ") } ?? ""
    #expect(row.contains("degraded: hostile[\\u{1}\\u{7}\\u{8}\\t\\n\\u{b}\\u{c}\\r\\u{1b}"), "\(list)")
    #expect(row.contains("\\u{9b}") && row.contains("\\u{202e}") && row.contains("\\u{2066}"), "\(list)")
    let explain = try #require(observed["explain"])
    #expect(explain.hasPrefix("status 0"), "\(explain)")
    Self.expectNoneRaw(in: explain, "explain")
    #expect(explain.contains("    summary: \(HostileText.escaped)\n"), "\(explain)")
    // surface: the UI module's toolbar title.
    let surface = try #require(observed["surface"])
    #expect(surface.hasPrefix("status 0"), "\(surface)")
    Self.expectNoneRaw(in: surface, "surface")
    #expect(
      surface.contains("  toolbar  t.hostile  \"\(HostileText.escaped)\"  from \(Self.uiID)\n"), "\(surface)")
    let surfaceJSON = try #require(observed["surface --json"])
    Self.expectNoneRaw(in: surfaceJSON, "surface --json")
    #expect(surfaceJSON.contains(HostileText.json(0x9B)) && surfaceJSON.contains(HostileText.json(0x202E)))

    for verb in ["list --json", "explain --json"] {
      let answer = try #require(observed[verb])
      #expect(answer.hasPrefix("status 0"), "\(verb): \(answer)")
      Self.expectNoneRaw(in: answer, verb)
      let body = answer.dropFirst("status 0\n".count)
      let json = String(body[..<(body.range(of: Self.stderrMark)?.lowerBound ?? body.endIndex)])
      let missing = HostileText.scalars.map(HostileText.json).filter { !json.contains($0) }
      #expect(missing.isEmpty, "\(verb): missing \(missing) in \(json)")
      #expect(json.contains("\"summary\" : \"") || json.contains("\"summary\": \""), "\(verb): \(json)")
      let root = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
      let modules = (root?["modules"] as? [[String: Any]]) ?? (root.map { [$0] } ?? [])
      let health = modules.first { $0["moduleID"] as? String == Self.id }?["health"] as? [String: Any]
      #expect(health?["summary"] as? String == HostileText.text, "\(verb): \(json)")
    }
  }
}
