import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

/// The Swift Toolbox example (Plugins/Toolbox) in a worker under a real `forsetti-host run`:
/// each service the SDK wraps does its work, checked from outside the module where it can be —
/// the exported file's bytes, the digest against Python's BLAKE2b, the sealed secret across a
/// restart, the health `list` shows, the row in the shared database's file, the api role's
/// answers to a C consumer, and the typed errors of refused calls.
@Suite(.onTestThreads, .serialized) struct ToolboxExampleTests: LiveHostSuite {
  let dir = TemporaryDirectory("toolbox")

  static let toolbox = "com.example.toolbox"
  static let client = "com.test.apiclient"
  var exports: String { dir.url("exports") }
  var report: String { exports + "/\(Self.toolbox)/toolbox-report.txt" }

  /// A C consumer of the `api` role that Toolbox holds: logs `apiclient METHOD -> STATUS HEX`.
  func installClient() throws {
    var f = ModuleFixture(moduleID: Self.client, entryPoint: "apiclient_entry")
    f.prelude = """
      static void ask(const forsetti_role_service *api, const char *method, const char *request) {
        unsigned char out[256]; size_t n = 0;
        forsetti_status s = api->call(method, request, strlen(request), out, sizeof out, &n);
        char line[700]; int at = snprintf(line, sizeof line, "apiclient %s -> %d ", method, (int)s);
        for (size_t i = 0; s == FORSETTI_OK && i < n && i < sizeof out; i++) at += snprintf(line + at, sizeof line - at, "%02x", out[i]);
        fixture_log(line);
      }
      """
    f.start = """
      const forsetti_role_service *api = host->resolve(FORSETTI_SERVICE_ROLE_API);
      if (api == NULL) { fixture_log("apiclient: no table"); return FORSETTI_ERR_DENIED; }
      size_t n = 0;
      for (int i = 0; i < 2400 && api->call("whoami", "", 0, NULL, 0, &n) == FORSETTI_ERR_UNAVAILABLE; i++) usleep(25000);
      ask(api, "whoami", "");
      ask(api, "hash", "abc");
      ask(api, "public-key", "");
      ask(api, "nosuch", "");
      fixture_log("apiclient: done");
      return FORSETTI_OK;
      """
    try f.install(
      in: dir, name: "apiclient", capabilities: ["api"],
      manifestExtra: #","manifestTemplateVersion":"1.1","runtimeRequirements":{"io":[],"#
        + #""dataIsolation":{"mode":"private_to_module","ownedStoreIDs":[],"requiredDefaultRoles":["api"]}}"#)
  }

  /// BLAKE2b of `text` by Python's hashlib: a second implementation, not the host's libsodium.
  static func blake2b(_ text: String, bytes: Int = 32) throws -> String {
    let r = try ProcessRunner.run(
      "/usr/bin/env",
      [
        "python3", "-c",
        "import hashlib, sys; print(hashlib.blake2b(sys.argv[1].encode(), digest_size=int(sys.argv[2])).hexdigest())",
        text, String(bytes),
      ])
    try #require(r.status == 0, "python3: \(r.stderr)")
    return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
  }

  /// Rows of the shared database's file as (owner, key, value), read with Python's sqlite3.
  func rows() throws -> [[String]] {
    let database = dir.url("state/sandboxes/com.example.shared-database/shared.sqlite3")
    let script = """
      import json, sqlite3, sys
      db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
      rows = db.execute("SELECT owner, key, value FROM rows ORDER BY owner, key").fetchall()
      print(json.dumps([[o, k, bytes(v).decode("utf-8", "replace")] for o, k, v in rows]))
      """
    let r = try ProcessRunner.run("/usr/bin/env", ["python3", "-c", script, database])
    try #require(r.status == 0, "python3 could not read \(database): \(r.stderr)")
    return try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String]] ?? []
  }

  /// The text after `toolbox: PREFIX` on Toolbox's line that has it, or nil.
  static func said(_ lines: [String], _ prefix: String) -> String? {
    let marker = "[module=\(toolbox)] toolbox: \(prefix)"
    return lines.first { $0.contains(marker) }.flatMap { line in
      line.range(of: marker).map { String(line[$0.upperBound...]) }
    }
  }

  /// One run until Toolbox has called the shared database (and the client has its answers);
  /// `check` runs while the host is still up. Returns every line the host printed.
  func run(_ extra: [String], _ check: (DevHost) throws -> Void = { _ in }) throws -> [String] {
    let host = try launch(["--approve-all"] + extra)
    defer { host.stop() }
    let db = host.await("[module=\(Self.toolbox)] toolbox: shared database: get title")
    try #require(
      db != nil, "Toolbox never called the shared database:\n\(host.lines.suffix(60).joined(separator: "\n"))"
    )
    try check(host)
    host.stop()
    #expect(host.process.terminationStatus == 0, "\(host.lines.suffix(40).joined(separator: "\n"))")
    return host.lines
  }

  @Test func everyServiceDoesItsWorkInAWorkerAndTheSecretSurvivesARestart() throws {
    try ExampleModules.installToolbox(in: dir)
    try installClient()
    let digest = try Self.blake2b("hello, toolbox")

    let first = try run(["--export-dir", exports]) { host in
      #expect(host.await("[module=\(Self.client)] apiclient: done") != nil, "\(host.lines.suffix(40))")
      // In a worker, the default: its library is mapped in one of the host's workers, not the host.
      let hostPID = host.process.processIdentifier
      let mapping = { (pid: pid_t) in
        ((try? String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8)) ?? "").contains(
          "libToolboxModule.so")
      }
      #expect(!mapping(hostPID), "the host itself loaded Toolbox")
      #expect(RunCommandTests.workers(of: hostPID).filter(mapping).count == 1, "no worker holds Toolbox")
      // Diagnostics, as the operator sees them in the running host.
      let w = published([Self.toolbox: "started"], by: host)
      try #require(w.reached, why(w, host))
      let socket = state + "/control.sock"
      let end = Date().addingTimeInterval(60)
      while !FileManager.default.fileExists(atPath: socket) && Date() < end { usleep(20_000) }
      let r = try HostBinary.run(["list", "--json", "--state", state], in: dir.url("state"))
      let root = try #require(try JSONParser.parse(r.stdout).objectValue, "\(r.stdout)\(r.stderr)")
      let toolbox = (root["modules"]?.arrayValue ?? []).compactMap(\.objectValue).first {
        $0["moduleID"]?.stringValue == Self.toolbox
      }
      let health = try #require(toolbox?["health"]?.objectValue, "\(r.stdout)")
      #expect(health["reportedBy"]?.stringValue == "module")
      #expect(health["status"]?.stringValue == "ok")
      #expect(health["summary"]?.stringValue == "every service answered at start 1")
      #expect(health["counters"]?.objectValue?["toolbox.starts"]?.integerValue == 1)
    }
    let text = first.joined(separator: "\n")

    // Typed errors of refused calls, and the nil of a service never requested.
    #expect(Self.said(first, "storage (not requested): ") == "nil", "\(text)")
    #expect(Self.said(first, "calling its own role: ") == "denied", "\(text)")
    #expect(Self.said(first, "crypto: open with another context: ") == "invalidData", "\(text)")

    // Crypto, the digest checked against another implementation.
    #expect(Self.said(first, #"crypto: blake2b-256("hello, toolbox") = "#) == digest, "\(text)")
    #expect(Self.said(first, "crypto: ") != nil)
    #expect(text.contains("toolbox: crypto: 16 random bytes"), "\(text)")
    #expect(text.contains("toolbox: crypto: sealed 14 bytes into 54, opened equal"), "\(text)")
    let signed = try #require(Self.said(first, "crypto: signature verifies: "), "\(text)")
    #expect(signed.hasPrefix("true, over altered bytes: false; public key "), "\(signed)")
    let publicKey = String(signed.split(separator: " ").last ?? "")
    #expect(publicKey.count == 64, "\(signed)")

    // File export: the file, with the bytes of both writes, where the operator put exports.
    #expect(Self.said(first, "file export: wrote ") == report, "\(text)")
    #expect(try String(contentsOfFile: report, encoding: .utf8) == "toolbox report\nstart 1: \(digest)\n")

    // Secure storage: the count and a secret made now.
    #expect(Self.said(first, "secure storage: start number ") == "1", "\(text)")
    let sealed = try #require(Self.said(first, "secure storage: secret sealed "), "\(text)")
    #expect(sealed.count == 32, "\(sealed)")

    // Serving the api role: the C consumer's answers.
    let client = first.filter { $0.contains("[module=\(Self.client)] apiclient ") }.joined(separator: "\n")
    let hexID = Self.client.utf8.map { String(format: "%02x", $0) }.joined()
    #expect(client.contains("apiclient whoami -> 0 \(hexID)"), "\(client)")
    #expect(client.contains("apiclient hash -> 0 \(try Self.blake2b("abc"))"), "\(client)")
    #expect(client.contains("apiclient public-key -> 0 \(publicKey)"), "\(client)")
    #expect(client.contains("apiclient nosuch -> -1 "), "unknown method is invalidArgument: \(client)")

    // Calling the shared_database role: the answer, and the row in the provider's file.
    #expect(Self.said(first, "shared database: toolbox.last-start = ") == #""start 1""#, "\(text)")
    #expect(Self.said(first, "shared database: get title: ") == "notFound", "\(text)")
    let rows1 = try rows()
    #expect(rows1.contains([Self.toolbox, "toolbox.last-start", "start 1"]), "\(rows1)")

    // A restart: the sealed count and secret come back; the report and the row are replaced.
    let second = try run(["--export-dir", exports])
    #expect(Self.said(second, "secure storage: start number ") == "2", "\(second)")
    #expect(Self.said(second, "secure storage: secret unsealed ") == sealed, "\(second)")
    #expect(try String(contentsOfFile: report, encoding: .utf8) == "toolbox report\nstart 2: \(digest)\n")
    let rows2 = try rows()
    #expect(rows2.contains([Self.toolbox, "toolbox.last-start", "start 2"]), "\(rows2)")
  }

  @Test func withoutAnExportDirectoryTheWriteIsUnavailableAndTheRestRuns() throws {
    try ExampleModules.installToolbox(in: dir)
    let lines = try run([])
    #expect(Self.said(lines, "file export: ") == "unavailable", "\(lines.suffix(40))")
    #expect(Self.said(lines, "diagnostics: ") == "reported ok", "\(lines.suffix(40))")
    #expect(!FileManager.default.fileExists(atPath: report))
  }
}
