import ForsettiTestSupport
import Foundation
import Testing

/// The shared database example (Plugins/SharedDatabase, Notes, Journal) under a real
/// `forsetti-host run`, isolated and in-process: the provider serves both consumers from one
/// SQLite file, and each module reaches only the rows the host's caller ID makes its own.
@Suite(.onTestThreads) struct SharedDatabaseExampleTests: LiveHostSuite {
  let dir = TemporaryDirectory("shared-db")

  static let provider = "com.example.shared-database"
  static let notes = "com.example.notes"
  static let journal = "com.example.journal"

  /// The provider's database file, where an operator would look for it.
  var database: String { dir.url("state/sandboxes/\(Self.provider)/shared.sqlite3") }

  /// `run` on this directory, in a worker per module or, with `inProcess`, in the host.
  func launch(inProcess: Bool) throws -> DevHost {
    try launch(["--approve-all"] + (inProcess ? ["--in-process"] : []))
  }

  /// Stops `host` with SIGTERM, as Ctrl-C would, and returns everything it printed.
  func finish(_ host: DevHost) -> String {
    host.stop()
    return host.lines.joined(separator: "\n")
  }

  /// Every row of the provider's file as (owner, key, value), read with Python's sqlite3 module.
  func rows() throws -> [(owner: String, key: String, value: String)] {
    let script = """
      import json, sqlite3, sys
      db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
      rows = db.execute("SELECT owner, key, value FROM rows ORDER BY owner, key").fetchall()
      print(json.dumps([[o, k, bytes(v).decode("utf-8", "replace")] for o, k, v in rows]))
      """
    try #require(FileManager.default.fileExists(atPath: database), "no database at \(database)")
    let r = try ProcessRunner.run("/usr/bin/env", ["python3", "-c", script, database])
    try #require(r.status == 0, "python3 could not read \(database): \(r.stderr)")
    let parsed = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String]] ?? []
    return parsed.compactMap { $0.count == 3 ? ($0[0], $0[1], $0[2]) : nil }
  }

  /// The keys a consumer's `<who>: N rows: k1 k2 …;` log lines name, over the whole run.
  static func loggedKeys(_ text: String, module: String, who: String) -> [String] {
    text.split(separator: "\n").filter {
      $0.contains("[module=\(module)] \(who): ") && $0.contains(" rows: ")
    }
    .flatMap { line -> [String] in
      guard let start = line.range(of: " rows: ")?.upperBound,
        let end = line[start...].firstIndex(of: ";")
      else { return ["<unparsed: \(line)>"] }
      return line[start..<end].split(separator: " ").map(String.init)
    }
  }

  /// Whether some line of `text` is `module`'s (metadata may follow its ID) and says `message`.
  static func line(in text: String, module: String, saying message: String) -> Bool {
    text.split(separator: "\n").contains { $0.contains("[module=\(module)") && $0.contains(message) }
  }

  @Test(arguments: [false, true])
  func theProviderKeepsEachConsumersRowsApart(inProcess: Bool) throws {
    try ExampleModules.installSharedDatabase(in: dir)
    let host = try launch(inProcess: inProcess)
    defer { host.stop() }
    // Both consumers have written two rows besides their title, and read them back.
    let notesLine = host.await("[module=\(Self.notes)] notes: 3 rows:")
    let journalLine = host.await("[module=\(Self.journal)] journal: 3 rows:")
    let text = finish(host)
    try #require(notesLine != nil && journalLine != nil, "\(text)")
    #expect(host.process.terminationStatus == 0, "\(text)")
    #expect(text.contains("3 modules: 3 ran and stopped cleanly"), "\(text)")
    #expect(text.contains("[module=\(Self.provider)] shared database: serving \(database)"), "\(text)")
    // Each stop ended its ticker thread and reported, after the consumer's last tick.
    #expect(text.contains("[module=\(Self.notes)] notes: stopped after"), "\(text)")
    #expect(text.contains("[module=\(Self.journal)] journal: stopped after"), "\(text)")
    #expect(text.contains(#"title = "my notes""#), "\(text)")

    // What each consumer read back is its own rows only.
    let notesKeys = Self.loggedKeys(text, module: Self.notes, who: "notes")
    let journalKeys = Self.loggedKeys(text, module: Self.journal, who: "journal")
    #expect(!notesKeys.isEmpty && !journalKeys.isEmpty)
    #expect(notesKeys.allSatisfy { $0 == "title" || $0.hasPrefix("note-") }, "\(notesKeys)")
    #expect(journalKeys.allSatisfy { $0 == "title" || $0.hasPrefix("entry-") }, "\(journalKeys)")

    // The one file holds both modules' rows, each under the ID the host bound the caller to,
    // and a key both use ("title") is two rows.
    let all = try rows()
    #expect(Set(all.map(\.owner)) == [Self.notes, Self.journal], "\(all)")
    let notesRows = all.filter { $0.owner == Self.notes }
    let journalRows = all.filter { $0.owner == Self.journal }
    #expect(notesRows.filter { $0.key.hasPrefix("note-") }.count >= 2, "\(all)")
    #expect(journalRows.filter { $0.key.hasPrefix("entry-") }.count >= 2, "\(all)")
    #expect(notesRows.allSatisfy { $0.key == "title" || $0.key.hasPrefix("note-") }, "\(all)")
    #expect(journalRows.allSatisfy { $0.key == "title" || $0.key.hasPrefix("entry-") }, "\(all)")
    #expect(notesRows.first { $0.key == "title" }?.value == "my notes")
    #expect(journalRows.first { $0.key == "title" }?.value == "my journal")
    // Journal read its newest entry back: the value the file holds.
    if let newest = journalRows.filter({ $0.key.hasPrefix("entry-") }).last {
      #expect(text.contains(#"\#(newest.key) = "\#(newest.value)""#), "\(newest) \(text)")
    }
  }

  /// A consumer that names Notes in every way a request could: as a key, as a prefix, after a
  /// NUL, in SQL. It is the host's caller ID, not the request, that says whose rows it reaches.
  @Test(arguments: [false, true])
  func aHostileConsumerReadsOnlyItsOwnRows(inProcess: Bool) throws {
    try ExampleModules.installSharedDatabase(in: dir)
    // First Notes writes its rows.
    let first = try launch(inProcess: inProcess)
    let wrote = first.await("[module=\(Self.notes)] notes: 2 rows:")
    let firstText = finish(first)
    try #require(wrote != nil, "\(firstText)")
    let notesBefore = try rows().filter { $0.owner == Self.notes }
    try #require(notesBefore.contains { $0.key == "note-0001" }, "\(notesBefore)")

    var snoop = ModuleFixture(moduleID: "com.test.snoop", entryPoint: "snoop_entry")
    snoop.prelude = Self.snoopPrelude
    snoop.start = """
      const forsetti_role_service *db = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      if (db == NULL) { fixture_log("snoop: no table"); return FORSETTI_ERR_DENIED; }
      /* The provider starts first; should it not serve yet, wait for it a little. */
      size_t n = 0;
      for (int i = 0; i < 2400 && db->call("list", "", 0, NULL, 0, &n) == FORSETTI_ERR_UNAVAILABLE; i++) usleep(25000);
      try_put(db, "owner", "com.example.notes");
      try_put(db, "title", "snooped");
      static const char owner_then_key[] = "com.example.notes\\0title";
      report(db, "get", "notes-id-NUL-title", owner_then_key, sizeof owner_then_key - 1);
      const char *keys[] = {"note-0001", "title", "com.example.notes/note-0001", "com.example.notes:title",
                            "' OR owner <> '", "note-0001' OR '1'='1", "owner"};
      for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) report(db, "get", keys[i], keys[i], strlen(keys[i]));
      report(db, "delete", "note-0001", "note-0001", 9);
      report(db, "list", "mine", "", 0);
      return FORSETTI_OK;
      """
    try dir.write(
      "manifests/snoop.json",
      snoop.manifest(
        capabilities: ["shared_database"],
        extra: #","manifestTemplateVersion":"1.1","runtimeRequirements":{"io":[],"#
          + #""dataIsolation":{"mode":"framework_mediated_shared","ownedStoreIDs":[],"requiredDefaultRoles":[]}}"#
      ))
    try snoop.build(in: dir, as: "plugins/snoop.so")

    let second = try launch(inProcess: inProcess)
    let listed = second.await("[module=com.test.snoop] snoop list mine")
    let text = finish(second)
    try #require(listed != nil, "\(text)")
    let snoopLines = text.split(separator: "\n").filter { $0.contains("[module=com.test.snoop]") }.joined(
      separator: "\n")
    // Every get of a Notes key, however dressed, finds nothing; the NUL is not a key at all.
    for key in [
      "note-0001", "com.example.notes/note-0001", "com.example.notes:title", "' OR owner <> '",
      "note-0001' OR '1'='1",
    ] {
      #expect(snoopLines.contains("snoop get \(key) -> NOT_FOUND"), "\(key): \(snoopLines)")
    }
    #expect(snoopLines.contains("snoop get notes-id-NUL-title -> INVALID_ARGUMENT"), "\(snoopLines)")
    // What it reads is what it wrote itself.
    #expect(snoopLines.contains("snoop get title -> OK \"snooped\""), "\(snoopLines)")
    #expect(snoopLines.contains("snoop get owner -> OK \"com.example.notes\""), "\(snoopLines)")
    #expect(snoopLines.contains("snoop delete note-0001 -> NOT_FOUND"), "\(snoopLines)")
    #expect(snoopLines.contains("snoop list mine -> OK \"owner,title,\""), "\(snoopLines)")
    #expect(!snoopLines.contains("my notes") && !snoopLines.contains("note number"), "\(snoopLines)")

    // Notes' rows are as they were (Notes may have added more), and the snoop's are its own.
    let after = try rows()
    let notesAfter = after.filter { $0.owner == Self.notes }
    for row in notesBefore where row.key == "title" || row.key == "note-0001" {
      #expect(notesAfter.contains { $0.key == row.key && $0.value == row.value }, "\(row) \(after)")
    }
    let snoopRows = after.filter { $0.owner == "com.test.snoop" }
    #expect(snoopRows.map(\.key) == ["owner", "title"], "\(after)")
    #expect(snoopRows.first { $0.key == "title" }?.value == "snooped")
  }

  /// C helpers of the hostile consumer: each call logged as `snoop METHOD LABEL -> STATUS "bytes"`.
  static let snoopPrelude = """
    static const char *status_name(forsetti_status s) {
      switch (s) {
      case FORSETTI_OK: return "OK";
      case FORSETTI_ERR_NOT_FOUND: return "NOT_FOUND";
      case FORSETTI_ERR_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
      case FORSETTI_ERR_UNAVAILABLE: return "UNAVAILABLE";
      case FORSETTI_ERR_DENIED: return "DENIED";
      default: return "OTHER";
      }
    }
    static void report(const forsetti_role_service *db, const char *method, const char *label, const void *req, size_t len) {
      char out[512]; size_t n = 0;
      forsetti_status s = db->call(method, req, len, out, sizeof out - 1, &n);
      if (s != FORSETTI_OK || n >= sizeof out) n = 0;
      for (size_t i = 0; i < n; i++) if (out[i] == 0) out[i] = ',';
      out[n] = 0;
      char line[768];
      snprintf(line, sizeof line, "snoop %s %s -> %s \\"%s\\"", method, label, status_name(s), out);
      fixture_log(line);
    }
    static void try_put(const forsetti_role_service *db, const char *key, const char *value) {
      char req[256]; size_t k = strlen(key), v = strlen(value);
      memcpy(req, key, k); req[k] = 0; memcpy(req + k + 1, value, v);
      size_t n = 0;
      forsetti_status s = db->call("put", req, k + 1 + v, NULL, 0, &n);
      char line[256]; snprintf(line, sizeof line, "snoop put %s -> %s", key, status_name(s));
      fixture_log(line);
    }
    """

  /// A module that did not request the capability, and one that requested it but neither
  /// holds nor consumes the role: resolve gives both NULL, and the host says why.
  @Test(arguments: [false, true])
  func aModuleWithoutTheCapabilityOrTheRoleGetsNoTable(inProcess: Bool) throws {
    try ExampleModules.installSharedDatabase(in: dir)
    let probe = """
      const void *t = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
      fixture_log(t == NULL ? "probe: resolve gave NULL" : "probe: resolve gave a table");
      return FORSETTI_OK;
      """
    var nocap = ModuleFixture(moduleID: "com.test.nocap", entryPoint: "nocap_entry")
    nocap.start = probe
    // Consumes the role (so it starts after the provider) but was never granted the capability.
    try dir.write(
      "manifests/nocap.json",
      nocap.manifest(
        extra: #","manifestTemplateVersion":"1.1","runtimeRequirements":{"io":[],"#
          + #""dataIsolation":{"mode":"framework_mediated_shared","ownedStoreIDs":[],"requiredDefaultRoles":[]}}"#
      ))
    try nocap.build(in: dir, as: "plugins/nocap.so")
    var bystander = ModuleFixture(moduleID: "com.test.bystander", entryPoint: "bystander_entry")
    bystander.start = probe
    try bystander.install(in: dir, capabilities: ["shared_database"])

    let host = try launch(inProcess: inProcess)
    let nocapSaid = host.await("[module=com.test.nocap] probe:")
    let bystanderSaid = host.await("[module=com.test.bystander] probe:")
    let text = finish(host)
    #expect(nocapSaid?.1.contains("probe: resolve gave NULL") == true, "\(text)")
    #expect(bystanderSaid?.1.contains("probe: resolve gave NULL") == true, "\(text)")
    #expect(
      Self.line(
        in: text, module: "com.test.nocap",
        saying:
          "denied service resolution: forsetti.role.shared_database needs capability shared_database, which was not granted"
      ), "\(text)")
    #expect(
      Self.line(
        in: text, module: "com.test.bystander",
        saying:
          "denied service resolution: forsetti.role.shared_database: the module neither holds the role shared_database"
      ), "\(text)")
    // The examples ran on beside them.
    #expect(text.contains("[module=\(Self.notes)] notes: "), "\(text)")
  }
}
