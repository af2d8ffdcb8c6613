import ForsettiTestSupport
import Foundation
import Testing

/// File export per module and the quotas of secure storage and export through a real
/// `forsetti-host run`, as root and as an unprivileged user, with hostile modules in workers.
@Suite(.onTestThreads) struct ExportAndQuotaAsUsersTests {
  /// Tries every way at a neighbour's export: `..`, an absolute path, the same name, links planted
  /// in its own directory, reading the file directly; then names no operator should see.
  static var thief: ModuleFixture {
    var f = ModuleFixture(moduleID: "com.test.thief", entryPoint: "thief_entry")
    f.prelude = #"""
      #include <fcntl.h>
      static const forsetti_file_export *fx;
      static void ex(const char *label, const char *name, uint32_t flags) {
        char l[300];
        snprintf(l, sizeof l, "%s -> %d", label, fx->write(name, "overwritten", 11, flags, NULL, 0));
        fixture_log(l);
      }
      """#
    f.start = #"""
      fx = host->resolve(FORSETTI_SERVICE_FILE_EXPORT);
      if (!fx) { fixture_log("services missing"); return FORSETTI_OK; }
      char path[4096] = {0}, victim[4200], l[4400];
      forsetti_status s = fx->write("mine.txt", "thief", 5, 0, path, sizeof path);
      snprintf(l, sizeof l, "own -> %d %s", s, path); fixture_log(l);
      char *cut = strstr(path, "/com.test.thief/mine.txt");
      if (cut) *cut = 0;
      snprintf(victim, sizeof victim, "%s/com.test.victim/secret.txt", path);
      ex("dotdot", "../com.test.victim/secret.txt", 0);
      ex("absolute", victim, 0);
      ex("same name", "secret.txt", 0);
      ex("link replaced", "link.txt", 0);
      ex("link appended", "abs.txt", FORSETTI_FILE_EXPORT_APPEND);
      int fd = open(victim, O_RDONLY);
      if (fd >= 0) {
        char got[64] = {0}; ssize_t n = read(fd, got, sizeof got - 1); (void)n; close(fd);
        snprintf(l, sizeof l, "read victim: got %s", got);
      } else {
        snprintf(l, sizeof l, "read victim: failed");
      }
      fixture_log(l);
      ex("newline", "bad\nname", 0);
      ex("escape", "esc\x1b[31m", 0);
      ex("rlo", "gpj\xe2\x80\xae.exe", 0);
      ex("not utf8", "b\xff\xfe", 0);
      fixture_log("thief done");
      return FORSETTI_OK;
      """#
    return f
  }

  @Test(arguments: HostileHost.Identity.allCases)
  func aModuleCannotReachAnothersExport(as identity: HostileHost.Identity) throws {
    let host = HostileHost(identity)
    try #require(host.isAvailable, "running as another user needs root")
    try host.install(Self.thief, capabilities: ["file_export"])
    let export = host.dir.url("export")
    let victim = export + "/com.test.victim/secret.txt"
    let own = export + "/com.test.thief"
    for d in [export + "/com.test.victim", own] {
      try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
    }
    // As an earlier run of the victim left it, and links as a module in the host could plant them.
    try "victim's".write(toFile: victim, atomically: false, encoding: .utf8)
    try FileManager.default.createSymbolicLink(
      atPath: own + "/link.txt", withDestinationPath: "../com.test.victim/secret.txt")
    try FileManager.default.createSymbolicLink(atPath: own + "/abs.txt", withDestinationPath: victim)

    let run = try host.run(for: 3, extraArguments: ["--export-dir", export])
    #expect(run.status == 0, "\(run.output)")
    let lines = run.lines("com.test.thief")
    #expect(lines.contains("thief done"), "\(run.output)")
    #expect(lines.contains("own -> 0 \(own)/mine.txt"), "\(lines)")
    // Every name lands in the thief's own directory; links are replaced or refused (-2).
    for expected in [
      "dotdot -> 0", "absolute -> 0", "same name -> 0", "link replaced -> 0", "link appended -> -2",
      "read victim: failed", "newline -> -1", "escape -> -1", "rlo -> -1", "not utf8 -> -1",
    ] {
      #expect(lines.contains(expected), "\(expected): \(lines)")
    }
    #expect(try String(contentsOfFile: victim, encoding: .utf8) == "victim's")
    #expect(try String(contentsOfFile: own + "/secret.txt", encoding: .utf8) == "overwritten")
    #expect(try String(contentsOfFile: own + "/link.txt", encoding: .utf8) == "overwritten")
    #expect(try FileManager.default.destinationOfSymbolicLink(atPath: own + "/abs.txt") == victim)
    // Nothing was created under a refused name.
    let made = try FileManager.default.contentsOfDirectory(atPath: own).sorted()
    #expect(made == ["abs.txt", "link.txt", "mine.txt", "secret.txt"], "\(made)")
    #expect(
      try FileManager.default.contentsOfDirectory(atPath: export).sorted() == [
        "com.test.thief", "com.test.victim",
      ])
    // The operator is told which rule refused which name, shown escaped.
    for shown in [
      #""bad\nname": it holds a control character"#, #""esc\u{1b}[31m": it holds a control character"#,
      #""gpj\u{202e}.exe": it holds a bidirectional control"#,
      #""b\xff\xfe": it holds bytes that are not UTF-8"#,
    ] {
      #expect(run.output.contains("refused the name " + shown), "\(shown): \(run.output)")
    }
  }

  @Test func quotaOptionsAreCheckedAndListed() throws {
    let dir = TemporaryDirectory("quota-options")
    for d in ["manifests", "plugins", "state"] {
      try FileManager.default.createDirectory(atPath: dir.url(d), withIntermediateDirectories: true)
    }
    let common = [
      "run", "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state",
      dir.url("state"),
      "--for", "0",
    ]
    for (option, value, why) in [
      ("storage-quota", "lots", "expected a non-negative number"),
      ("export-quota", "-1", "expected a non-negative number"),
      ("storage-quota", "2000000", "at most 1048576 MiB"), ("export-quota", "1e300", "at most 16777216 MiB"),
    ] {
      let r = try HostBinary.run(common + ["--\(option)", value])
      #expect(r.status == 2, "--\(option) \(value): \(r.stderr)")
      #expect(r.stderr.contains("--\(option)") && r.stderr.contains(why), "\(r.stderr)")
    }
    // A positive control: the same host starts with good values.
    let good = try HostBinary.run(common + ["--storage-quota", "0.5", "--export-quota", "1024"])
    #expect(good.status == 0, "\(good.stderr)")
    let help = try HostBinary.run(["run", "--help"])
    #expect(
      help.stdout.contains("--storage-quota") && help.stdout.contains("--export-quota"), "\(help.stdout)")
  }

  /// Fills secure storage and its export directory from 8 threads until refused, then frees room
  /// and writes again; started again on the same state, it is refused at once.
  static var hog: ModuleFixture {
    var f = ModuleFixture(moduleID: "com.test.hog", entryPoint: "hog_entry")
    f.prelude = #"""
      #include <pthread.h>
      static const forsetti_secure_storage *sec;
      static const forsetti_file_export *fx;
      static char big[60000];
      static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
      static int stored, exported;
      static char first_key[64], first_file[64];
      static forsetti_status store_refused, export_refused;
      static void say(const char *what, forsetti_status s) {
        char l[200]; snprintf(l, sizeof l, "%s -> %d", what, s); fixture_log(l);
      }
      static void *fill(void *arg) {
        long t = (long)arg; char name[64];
        for (int j = 0; j < 100; j++) {
          snprintf(name, sizeof name, "t%ld_%d", t, j);
          forsetti_status s = sec->set(name, big, sizeof big);
          pthread_mutex_lock(&mu);
          if (s == FORSETTI_OK) { if (!stored++) strcpy(first_key, name); } else store_refused = s;
          pthread_mutex_unlock(&mu);
          if (s != FORSETTI_OK) break;
        }
        for (int j = 0; j < 100; j++) {
          snprintf(name, sizeof name, "t%ld_%d.bin", t, j);
          forsetti_status s = fx->write(name, big, sizeof big, 0, NULL, 0);
          pthread_mutex_lock(&mu);
          if (s == FORSETTI_OK) { if (!exported++) strcpy(first_file, name); } else export_refused = s;
          pthread_mutex_unlock(&mu);
          if (s != FORSETTI_OK) break;
        }
        return NULL;
      }
      """#
    f.start = #"""
      sec = host->resolve(FORSETTI_SERVICE_SECURE_STORAGE);
      fx = host->resolve(FORSETTI_SERVICE_FILE_EXPORT);
      if (!sec || !fx) { fixture_log("services missing"); return FORSETTI_OK; }
      memset(big, 'x', sizeof big);
      size_t n = 0;
      if (sec->get("run", NULL, 0, &n) == FORSETTI_ERR_BUFFER_TOO_SMALL) {
        say("again store", sec->set("fresh", big, sizeof big));
        say("again export", fx->write("fresh.bin", big, sizeof big, 0, NULL, 0));
        say("again overwrite", sec->set("after", big, sizeof big));
        fixture_log("hog done");
        return FORSETTI_OK;
      }
      say("marker", sec->set("run", "1", 1));
      pthread_t t[8];
      for (long i = 0; i < 8; i++) pthread_create(&t[i], NULL, fill, (void *)i);
      for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
      char l[200];
      snprintf(l, sizeof l, "filled stored=%d refused=%d exported=%d refused=%d", stored, store_refused,
               exported, export_refused);
      fixture_log(l);
      say("remove", sec->remove(first_key));
      say("store after remove", sec->set("after", big, sizeof big));
      say("shrink", fx->write(first_file, "y", 1, 0, NULL, 0));
      say("export after shrink", fx->write("after.bin", big, sizeof big, 0, NULL, 0));
      fixture_log("hog done");
      return FORSETTI_OK;
      """#
    return f
  }

  static var calm: ModuleFixture {
    var f = ModuleFixture(moduleID: "com.test.calm", entryPoint: "calm_entry")
    f.start = #"""
      const forsetti_secure_storage *sec = host->resolve(FORSETTI_SERVICE_SECURE_STORAGE);
      const forsetti_file_export *fx = host->resolve(FORSETTI_SERVICE_FILE_EXPORT);
      if (!sec || !fx) { fixture_log("services missing"); return FORSETTI_OK; }
      char l[100];
      snprintf(l, sizeof l, "calm store -> %d", sec->set("token", "calm", 4)); fixture_log(l);
      snprintf(l, sizeof l, "calm export -> %d", fx->write("calm.txt", "calm", 4, 0, NULL, 0)); fixture_log(l);
      return FORSETTI_OK;
      """#
    return f
  }

  @Test(arguments: HostileHost.Identity.allCases)
  func quotasAreNamedSpareTheNeighbourAndSurviveARestart(as identity: HostileHost.Identity) throws {
    let host = HostileHost(identity)
    try #require(host.isAvailable, "running as another user needs root")
    let both = ["secure_storage", "file_export"]
    try host.install(Self.hog, capabilities: both)
    try host.install(Self.calm, capabilities: both)
    let export = host.dir.url("export")
    // 256 KiB each: 4 values of 60,000 bytes fit (61,440 each in 4 KiB blocks) beside the marker.
    let arguments = ["--export-dir", export, "--storage-quota", "0.25", "--export-quota", "0.25"]
    let storageLine = "secure storage quota of 256 KiB reached for com.test.hog (--storage-quota)"
    let exportLine = "file export quota of 256 KiB reached for com.test.hog (--export-quota)"

    let first = try host.run(for: 3, extraArguments: arguments)
    #expect(first.status == 0, "\(first.output)")
    let hog = first.lines("com.test.hog")
    #expect(hog.contains("hog done"), "\(first.output)")
    // -14 is FORSETTI_ERR_QUOTA: exactly four of 8 threads' writes fit, the rest are refused.
    for expected in [
      "marker -> 0", "filled stored=4 refused=-14 exported=4 refused=-14", "remove -> 0",
      "store after remove -> 0", "shrink -> 0", "export after shrink -> 0",
    ] {
      #expect(hog.contains(expected), "\(expected): \(hog)")
    }
    // One line for each quota, not one for each of the refused calls.
    #expect(first.output.components(separatedBy: storageLine).count == 2, "\(first.output)")
    #expect(first.output.components(separatedBy: exportLine).count == 2, "\(first.output)")
    #expect(first.lines("com.test.calm").contains("calm store -> 0"), "\(first.output)")
    let mode =
      try FileManager.default.attributesOfItem(atPath: export + "/com.test.hog")[.posixPermissions] as? Int
    #expect(mode == 0o750)

    // Started again on the same state: the hog is still at both quotas from its first call, and
    // its neighbour stores and exports all the while.
    let second = try host.run(for: 3, extraArguments: arguments)
    #expect(second.status == 0, "\(second.output)")
    let again = second.lines("com.test.hog")
    for expected in ["again store -> -14", "again export -> -14", "again overwrite -> 0", "hog done"] {
      #expect(again.contains(expected), "\(expected): \(again)")
    }
    #expect(second.output.contains(storageLine), "\(second.output)")
    #expect(second.output.contains(exportLine), "\(second.output)")
    let calm = second.lines("com.test.calm")
    #expect(calm.contains("calm store -> 0") && calm.contains("calm export -> 0"), "\(second.output)")
    #expect(try String(contentsOfFile: export + "/com.test.calm/calm.txt", encoding: .utf8) == "calm")
  }
}
