import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

/// What modules report about their own health, as an operator sees it: `list` and `explain`
/// against the real running host (through its control socket), marked as the module's words
/// and escaped; gone when the module stops; unknown with no host. And `--export-dir` of `run`.
@Suite(.onTestThreads, .serialized) struct DiagnosticsCommandTests: LiveHostSuite {
  let dir = TemporaryDirectory("diagnostics")

  /// A summary with an escape sequence, a newline and a syslog priority prefix after it.
  static let hostileSummary = #"disk \x1b[31mred\n<0>boom"#

  /// A module that reports degraded with `summary` and a counter, then logs `reported`; with
  /// `export`, it also exports `cli.txt` and logs the status and path.
  func reporter(_ id: String, summary: String, export: Bool = false) throws {
    let entry = (id.split(separator: ".").last.map(String.init) ?? "module") + "_entry"
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.start = """
      const forsetti_diagnostics *d = host->resolve(FORSETTI_SERVICE_DIAGNOSTICS);
      if (!d) return FORSETTI_ERR_START_FAILED;
      d->report(FORSETTI_HEALTH_DEGRADED, "\(summary)");
      d->set_counter("queue.depth", 7);
      \(export ? """
        const forsetti_file_export *x = host->resolve(FORSETTI_SERVICE_FILE_EXPORT);
        char path[4096] = {0}; char line[4200];
        int r = x ? x->write("../cli.txt", "exported", 8, 0, path, sizeof path) : -100;
        snprintf(line, sizeof line, "export r=%d path=%s", r, path); fixture_log(line);
        """ : "")
      fixture_log("reported");
      return FORSETTI_OK;
      """
    try f.install(in: dir, name: entry, capabilities: ["diagnostics"] + (export ? ["file_export"] : []))
  }

  /// `forsetti-host ARGS` against this state directory, from a directory with no manifests.
  func ask(_ args: [String]) throws -> ProcessResult {
    try HostBinary.run(args + ["--state", state], in: dir.url("state"))
  }

  func modules(_ r: ProcessResult) throws -> [String: JSONObject] {
    let root = try #require(try JSONParser.parse(r.stdout).objectValue, "\(r.stdout)")
    var out: [String: JSONObject] = [:]
    for case .object(let m) in root["modules"]?.arrayValue ?? [] {
      if let id = m["moduleID"]?.stringValue { out[id] = m }
    }
    return out
  }

  @Test func listAndExplainShowTheModulesOwnReportEscapedUntilItStops() throws {
    try reporter("com.test.sick", summary: Self.hostileSummary, export: true)
    try module("com.test.quiet")
    // Relative, from the host's working directory: made absolute and created.
    let host = try DevHost(
      [
        "run", "--manifests", manifests, "--plugins", dir.url("plugins"), "--state", state, "--for", "30",
        "--approve-all", "--export-dir", "out/exports",
      ],
      verb: nil, in: dir.path)
    defer { host.stop() }
    let w = published(["com.test.sick": "started", "com.test.quiet": "started"], by: host)
    try #require(w.reached, why(w, host))
    _ = answering(host)

    let exported = dir.url("out/exports") + "/com.test.sick/cli.txt"
    #expect(host.await("export r=0 path=\(exported)") != nil, "\(host.lines.suffix(20))")
    #expect(try String(contentsOfFile: exported, encoding: .utf8) == "exported")

    // list --json: the report as data, marked as the module's.
    var r = try ask(["list", "--json"])
    #expect(r.stderr.contains("answered by the host running on"), "\(r.stderr)")
    let listed = try modules(r)
    let health = try #require(listed["com.test.sick"]?["health"]?.objectValue, "\(r.stdout)")
    #expect(health["reportedBy"]?.stringValue == "module")
    #expect(health["status"]?.stringValue == "degraded")
    #expect(health["summary"]?.stringValue == "disk \u{1b}[31mred\n<0>boom")
    #expect(health["counters"]?.objectValue?["queue.depth"]?.integerValue == 7)
    #expect(listed["com.test.quiet"]?["health"] == .null)
    #expect(try JSONParser.parse(r.stdout).objectValue?["healthKnown"] == .bool(true))

    // list: a column, escaped; no raw control character and no priority prefix reaches the terminal.
    r = try ask(["list"])
    let row = try #require(
      r.stdout.split(separator: "\n").first { $0.hasPrefix("com.test.sick") }, "\(r.stdout)")
    #expect(row.hasSuffix(#"degraded: disk \u{1b}[31mred\n\u{3c}0>boom"#), "\(row)")
    #expect(r.stdout.contains("HEALTH is each module's own report"))
    #expect(!r.stdout.unicodeScalars.contains { $0.value == 0x1b } && !r.stdout.contains("<0>"))

    // explain: a section saying whose words these are.
    r = try ask(["explain", "com.test.sick"])
    #expect(r.stdout.contains("health (reported by the module): degraded"), "\(r.stdout)")
    #expect(r.stdout.contains(#"    summary: disk \u{1b}[31mred\n\u{3c}0>boom"#), "\(r.stdout)")
    #expect(r.stdout.contains("    counter queue.depth = 7"))
    #expect(!r.stdout.unicodeScalars.contains { $0.value == 0x1b } && !r.stdout.contains("<0>"))
    r = try ask(["explain", "com.test.quiet"])
    #expect(r.stdout.contains("health (reported by the module): nothing reported"), "\(r.stdout)")
    r = try ask(["explain", "--json", "com.test.sick"])
    #expect(
      try JSONParser.parse(r.stdout).objectValue?["health"]?.objectValue?["status"]?.stringValue == "degraded"
    )

    // A module that stops no longer shows what it said.
    try activation("disable", "com.test.sick")
    let stopped = published(["com.test.sick": "inactive/moduleDisabled"], by: host)
    try #require(stopped.reached, why(stopped, host))
    r = try ask(["list", "--json"])
    #expect(try modules(r)["com.test.sick"]?["health"] == .null, "\(r.stdout)")
    r = try ask(["explain", "com.test.sick"])
    #expect(r.stdout.contains("health (reported by the module): nothing reported"), "\(r.stdout)")

    // No host: nobody knows, and the answer says so.
    host.stop()
    r = try ask(["list", "--manifests", manifests])
    #expect(r.stdout.contains("HEALTH: no running host: health unknown"), "\(r.stdout)")
    r = try ask(["list", "--json", "--manifests", manifests])
    let root = try JSONParser.parse(r.stdout).objectValue
    #expect(root?["healthKnown"] == .bool(false))
    #expect(root?["healthNote"]?.stringValue == "no running host: health unknown")
    r = try ask(["explain", "com.test.quiet", "--manifests", manifests])
    #expect(r.stdout.contains("health: no running host: health unknown"), "\(r.stdout)")
  }

  @Test func anExportDirThatIsAFileIsAUsageError() throws {
    try module("com.test.quiet")
    let file = try dir.write("not-a-dir", "x")
    let r = try HostBinary.run([
      "run", "--in-process", "--manifests", manifests, "--plugins", dir.url("plugins"), "--state", state,
      "--for", "0", "--export-dir", file,
    ])
    #expect(r.status == 2, "\(r.stdout)\(r.stderr)")
    #expect(r.stderr.contains("export-dir"), "\(r.stderr)")
  }
}
