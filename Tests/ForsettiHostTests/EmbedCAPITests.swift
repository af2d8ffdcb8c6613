import ForsettiTestSupport
import Foundation
import Testing

/// The C API (`forsetti/embed.h`, libforsetti-embed) as an application meets it: installed into
/// a temporary prefix by `scripts/install` (the debug build's products, `--bin-dir`: a release
/// build would take minutes; the debug library finds the Swift runtime through the toolchain
/// RUNPATH SwiftPM gives it), C programs built with nothing but
/// `pkg-config --cflags --libs forsetti-embed`, run as processes.
@Suite(.onTestThreads) struct EmbedCAPITests {
  /// Where the documented program is, and the marker line before its fenced block: the
  /// document may move (docs/embedding.md) without the test changing but here.
  static let document = "docs/embedding.md"
  static let marker = "<!-- embed: c/embed.c -->"

  let dir = TemporaryDirectory("embed-capi")

  /// Installs into `dir/prefix`; returns the prefix.
  func install() throws -> String {
    let prefix = dir.url("prefix")
    let bin = (HostBinary.path as NSString).deletingLastPathComponent
    let r = try ProcessRunner.run(
      ExampleModules.root("scripts/install"), ["--prefix", prefix, "--bin-dir", bin])
    try #require(r.status == 0, "scripts/install failed: \(r.stderr)")
    return prefix
  }

  /// Compiles `source` into `dir/name` with the flags pkg-config gives for the installation.
  func build(_ source: String, named name: String, prefix: String) throws -> String {
    let flags = try ProcessRunner.run(
      "/usr/bin/env",
      ["PKG_CONFIG_PATH=\(prefix)/lib/pkgconfig", "pkg-config", "--cflags", "--libs", "forsetti-embed"])
    try #require(flags.status == 0, "pkg-config: \(flags.stderr)")
    let file = try dir.write("src/\(name).c", source)
    let out = dir.url(name)
    let cc = try ProcessRunner.run(
      "/usr/bin/env",
      ["cc", "-Wall", "-Wextra", "-Werror", "-o", out, file]
        + flags.stdout.split(whereSeparator: \.isWhitespace).map(String.init))
    try #require(cc.status == 0, "cc failed: \(cc.stderr)")
    return out
  }

  /// The fenced block right after `marker` in `document` (a path in the package).
  static func program(in document: String, after marker: String) throws -> String {
    let text = try String(contentsOfFile: ExampleModules.root(document), encoding: .utf8)
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    let at = try #require(lines.firstIndex { $0.trimmingCharacters(in: .whitespaces) == marker })
    let open = try #require(lines[(at + 1)...].firstIndex { $0.hasPrefix("```") })
    let close = try #require(lines[(open + 1)...].firstIndex { $0 == "```" }, "the block never closes")
    return lines[(open + 1)..<close].joined(separator: "\n") + "\n"
  }

  @Test func theDocumentedProgramRunsTheExamplesAndPrintsTheRoleAnswer() throws {
    let prefix = try install()
    let program = try build(
      Self.program(in: Self.document, after: Self.marker), named: "embed", prefix: prefix)
    try ExampleModules.installSharedDatabase(in: dir)
    // A paid module the application's entitlement callback unlocks, which calls the
    // application's weather service from its worker.
    try ExampleModules.installAskTheApp(in: dir, product: "com.example.weather-plus")
    let r = try ProcessRunner.run(program, [dir.url("manifests"), dir.url("plugins"), dir.url("state")])
    // The host ran the modules in workers: the one installed beside the library was found.
    #expect(
      r.stdout.contains("com.example.shared-database: started"),
      "no start of the database in:\n\(r.stdout)\n\(r.stderr)")
    #expect(
      r.stdout.contains("entitlement: com.example.asktheapp asks for com.example.weather-plus: unlocked"),
      "\(r.stdout)")
    #expect(r.stdout.contains("com.example.asktheapp: started"), "\(r.stdout)")
    #expect(r.stdout.contains("weather: com.example.asktheapp asks about Oslo"), "\(r.stdout)")
    #expect(
      r.stdout.contains("shared_database says: hello from C"), "stdout:\n\(r.stdout)\nstderr:\n\(r.stderr)")
    #expect(r.status == 0)
  }

  /// The document's `poll` loop, built with pkg-config alone, on a module that crashes 100 ms
  /// after each start: the crash reaches the loop through the host's descriptor (nothing else
  /// wakes a `poll` whose timeout is the run's end while no timer is due), each restart comes at
  /// the time `next_due` gives, and the third crash quarantines the module (`max-restarts` 2).
  @Test func thePollLoopOfTheDocumentHearsEachCrashThroughTheDescriptor() throws {
    let prefix = try install()
    let program = try build(
      Self.program(in: Self.document, after: "<!-- embed: c/poll.c -->"), named: "poll-loop", prefix: prefix)
    var f = ModuleFixture(moduleID: "com.test.crashy", entryPoint: "crashy_entry")
    f.prelude = """
      #include <pthread.h>
      #include <stdlib.h>
      #include <time.h>
      static void *later(void *unused) {
        (void)unused;
        struct timespec t = {0, 100000000};
        nanosleep(&t, NULL);
        abort();
      }
      """
    f.start = "pthread_t t; pthread_create(&t, NULL, later, NULL); pthread_detach(t); return FORSETTI_OK;"
    try f.install(in: dir, capabilities: [])
    // Three starts, three crash reports and the backoffs between them (0.25 s, 0.5 s) take about
    // 1.5 s here; 20 s leave room for a loaded machine. The loop returns at the deadline.
    let r = try ProcessRunner.run(
      program, [dir.url("manifests"), dir.url("plugins"), dir.url("state"), "20"])
    #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
    let lines = r.stdout.split(separator: "\n").map(String.init)
    #expect(lines.filter { $0 == "com.test.crashy: started" }.count == 3, "\(r.stdout)")
    #expect(lines.last == "com.test.crashy: failed quarantined", "\(r.stdout)\n\(r.stderr)")
  }

  @Test func everyBadArgumentIsAnErrorWithItsValueNotACrash() throws {
    let prefix = try install()
    let program = try build(Self.refusals, named: "refusals", prefix: prefix)
    for d in ["manifests", "plugins", "state"] {
      try FileManager.default.createDirectory(atPath: dir.url(d), withIntermediateDirectories: true)
    }
    let r = try ProcessRunner.run(program, [dir.url("manifests"), dir.url("plugins"), dir.url("state")])
    try #require(r.status == 0, "the program crashed or failed: \(r.status)\n\(r.stdout)\n\(r.stderr)")
    var seen: [String: (code: Int32, message: String)] = [:]
    for line in r.stdout.split(separator: "\n") {
      let parts = line.split(separator: " ", maxSplits: 2).map(String.init)
      guard parts.count >= 2, let code = Int32(parts[1]) else { continue }
      seen[parts[0]] = (code, parts.count > 2 ? parts[2] : "")
    }
    let expected: [(name: String, code: Int32, says: String)] = [
      ("null-config", 1, "config is NULL"), ("null-path", 1, "path is NULL"),
      ("empty-path", 3, "must not be empty"), ("bad-utf8", 2, "path is not UTF-8"),
      ("null-service-id", 1, "service_id is NULL"),
      ("unknown-capability", 3, "capability 'weather_reports': no such capability"),
      ("bad-service-id", 3, "service_id 'weather'"), ("null-handler", 1, "handler is NULL"),
      ("duplicate-service", 3, "'com.example.weather.v1': added already"),
      ("missing-setting", 4, "no manifests directory"), ("null-host-out", 1, "host_out is NULL"),
      ("call-before-start", 5, "before forsetti_embed_host_start"),
      ("run-before-start", 5, "before forsetti_embed_host_start"), ("start-twice", 5, "twice"),
      ("unknown-role", 3, "role 'printer'"), ("ui-role", 3, "role 'ui'"), ("empty-method", 3, "method ''"),
      ("null-request", 1, "request is NULL"), ("too-large", 3, "request_length '65537'"),
      ("null-status", 1, "status is NULL"), ("nan-seconds", 3, "seconds 'nan'"),
      ("huge-seconds", 3, "seconds '1e+300'"), ("null-host", 1, "host is NULL"),
      ("null-milliseconds", 1, "milliseconds is NULL"),
      ("call-after-stop", 5, "after forsetti_embed_host_stop"),
      ("set-unknown", 3, "memory-limt '64': no such setting"),
      ("set-range", 3, "memory-limit '99999999': isolation.limits.memoryBytes: at most 16777216 MiB"),
      ("set-text", 3, "max-restarts 'many': isolation.maxRestarts: expected a non-negative number"),
      ("set-null-key", 1, "key is NULL"), ("negative-seconds", 3, "seconds '-5.0'"),
      ("stop-other-thread", 5, "forsetti_embed_host_stop from a thread other than the host's"),
      ("process-other-thread", 5, "forsetti_embed_host_process from a thread other than the host's"),
      ("null-fd", 1, "fd is NULL"),
    ]
    for e in expected {
      let got = try #require(seen[e.name], "no error for \(e.name) in:\n\(r.stdout)")
      #expect(got.code == e.code, "\(e.name): \(got.message)")
      #expect(got.message.contains(e.says), "\(e.name): \(got.message)")
    }
    // The positive controls: the same calls with good arguments succeed, the host runs and
    // stops, and the NULL-tolerant functions return.
    for name in [
      "service", "set-application", "host", "start", "run", "run-until-stopped", "fd", "fd-other-thread",
      "next-due", "process", "stop",
    ] {
      #expect(r.stdout.contains("\(name) ok\n"), "\(name) did not succeed:\n\(r.stdout)")
    }
    #expect(r.stdout.contains("\nending 1\n"), "a run of 0.05 s ends at its deadline")
    #expect(r.stdout.contains("stopped-ending 2\n"), "a run another thread stops ends so")
    #expect(r.stdout.contains("due-known 1\n"))
    #expect(r.stdout.contains("fd-valid 1\n"))
    #expect(r.stdout.contains("null-error [] 0\n"))
    #expect(r.stdout.hasSuffix("end\n"))
  }

  @Test func theApplicationsCallbacksDecideEntitlementsAndCapabilities() throws {
    let prefix = try install()
    let program = try build(Self.callbacks, named: "callbacks", prefix: prefix)
    // Two paid modules (one product the application unlocks, one it does not), one asking for a
    // capability its policy refuses, and one it lets run: the positive control.
    try ModuleFixture(moduleID: "com.test.paid", entryPoint: "paid_entry")
      .install(in: dir, manifestExtra: #","iapProductID":"com.test.pro""#)
    try ModuleFixture(moduleID: "com.test.locked", entryPoint: "locked_entry")
      .install(in: dir, manifestExtra: #","iapProductID":"com.test.other""#)
    try ModuleFixture(moduleID: "com.test.storage", entryPoint: "storage_entry")
      .install(in: dir, capabilities: ["storage"])
    try ModuleFixture(moduleID: "com.test.free", entryPoint: "free_entry")
      .install(in: dir, capabilities: ["telemetry"])
    let r = try ProcessRunner.run(program, [dir.url("manifests"), dir.url("plugins"), dir.url("state")])
    let out = r.stdout + r.stderr
    try #require(r.status == 0, "\(out)")
    #expect(out.contains("entitlement com.test.pro com.test.paid\n"), "\(out)")
    #expect(out.contains("entitlement com.test.other com.test.locked\n"), "\(out)")
    #expect(out.contains("policy com.test.storage storage\n"), "\(out)")
    #expect(out.contains("com.test.paid: started\n"), "\(out)")
    #expect(out.contains("com.test.free: started\n"), "\(out)")
    #expect(out.contains("com.test.locked: blocked moduleLocked\n"), "\(out)")
    #expect(out.contains("com.test.storage: blocked capabilityDenied\n"), "\(out)")
    #expect(!out.contains("com.test.locked: started") && !out.contains("com.test.storage: started"), "\(out)")
  }

  /// Runs a host in process whose entitlement and policy callbacks say each question asked,
  /// unlock `com.test.pro` only and refuse `storage`; prints every module's change.
  static let callbacks = #"""
    #include <forsetti/embed.h>
    #include <stdio.h>
    #include <string.h>

    static bool unlocked(void *context, const char *product_id, const char *module_id) {
      (void)context;
      printf("entitlement %s %s\n", product_id, module_id);
      return strcmp(product_id, "com.test.pro") == 0;
    }

    static bool allowed(void *context, const char *module_id, const char *capability) {
      (void)context;
      printf("policy %s %s\n", module_id, capability);
      return strcmp(capability, "storage") != 0;
    }

    static void changed(void *context, const char *module_id, const char *state, const char *reason) {
      (void)context;
      printf("%s: %s%s%s\n", module_id ? module_id : "-", state, reason ? " " : "", reason ? reason : "");
    }

    static int check(const char *what, forsetti_embed_error *error) {
      if (error == NULL) return 0;
      fprintf(stderr, "%s: %s\n", what, forsetti_embed_error_message(error));
      forsetti_embed_error_delete(error);
      return 1;
    }

    int main(int argc, char **argv) {
      if (argc != 4) return 2;
      forsetti_embed_config *c = forsetti_embed_config_new();
      forsetti_embed_host *h = NULL;
      if (check("manifests", forsetti_embed_config_set_manifests_dir(c, argv[1])) ||
          check("plugins", forsetti_embed_config_add_plugins_dir(c, argv[2])) ||
          check("state", forsetti_embed_config_set_state_dir(c, argv[3])) ||
          check("in-process", forsetti_embed_config_set_in_process(c, true)) ||
          check("approve", forsetti_embed_config_set_approve_all(c, true)) ||
          check("entitlements", forsetti_embed_config_set_entitlement_callback(c, unlocked, NULL)) ||
          check("policy", forsetti_embed_config_set_policy_callback(c, allowed, NULL)) ||
          check("host", forsetti_embed_host_new(c, &h)))
        return 1;
      forsetti_embed_config_delete(c);
      if (check("observe", forsetti_embed_host_observe(h, changed, NULL)) ||
          check("start", forsetti_embed_host_start(h)) || check("stop", forsetti_embed_host_stop(h)))
        return 1;
      forsetti_embed_host_delete(h);
      return 0;
    }
    """#

  /// Calls every refusing path of the API and prints `NAME CODE MESSAGE` or `NAME ok`.
  static let refusals = #"""
    #include <forsetti/embed.h>
    #include <math.h>
    #include <pthread.h>
    #include <stdatomic.h>
    #include <stdio.h>
    #include <time.h>

    static void report(const char *name, forsetti_embed_error *error) {
      if (error == NULL) {
        printf("%s ok\n", name);
        return;
      }
      printf("%s %d %s\n", name, (int)forsetti_embed_error_code(error), forsetti_embed_error_message(error));
      forsetti_embed_error_delete(error);
    }

    static forsetti_status handler(void *context, const char *caller, const char *method, const void *request,
                                   size_t request_length, void *response, size_t capacity,
                                   size_t *response_length) {
      (void)context, (void)caller, (void)method, (void)request, (void)request_length, (void)response,
          (void)capacity;
      *response_length = 0;
      return FORSETTI_OK;
    }

    static atomic_bool run_ended;

    /* Asks the host to stop from another thread until its run has ended: whenever the request
     * comes, the run in progress ends with it. */
    static void *stopper(void *host) {
      const struct timespec pause = {0, 1000000};
      while (!atomic_load(&run_ended)) {
        forsetti_embed_error_delete(forsetti_embed_host_request_stop(host));
        nanosleep(&pause, NULL);
      }
      return NULL;
    }

    /* The host's-thread functions, called from another: each refused, the host untouched. */
    static void *from_another_thread(void *host) {
      report("stop-other-thread", forsetti_embed_host_stop(host));
      report("process-other-thread", forsetti_embed_host_process(host));
      int fd = -1;
      report("fd-other-thread", forsetti_embed_host_fd(host, &fd));
      return NULL;
    }

    int main(int argc, char **argv) {
      if (argc != 4) return 2;
      forsetti_embed_config *c = forsetti_embed_config_new();
      report("null-config", forsetti_embed_config_set_manifests_dir(NULL, "manifests"));
      report("null-path", forsetti_embed_config_set_manifests_dir(c, NULL));
      report("empty-path", forsetti_embed_config_set_manifests_dir(c, ""));
      report("bad-utf8", forsetti_embed_config_set_state_dir(c, "state\xff\xfe"));
      report("null-service-id", forsetti_embed_config_add_service(c, NULL, "api", handler, NULL));
      report("unknown-capability",
             forsetti_embed_config_add_service(c, "com.example.weather.v1", "weather_reports", handler, NULL));
      report("bad-service-id", forsetti_embed_config_add_service(c, "weather", "api", handler, NULL));
      report("null-handler", forsetti_embed_config_add_service(c, "com.example.weather.v1", "api", NULL, NULL));
      report("service", forsetti_embed_config_add_service(c, "com.example.weather.v1", "api", handler, NULL));
      report("duplicate-service",
             forsetti_embed_config_add_service(c, "com.example.weather.v1", "api", handler, NULL));
      forsetti_embed_host *h = NULL;
      report("missing-setting", forsetti_embed_host_new(c, &h));
      report("manifests", forsetti_embed_config_set_manifests_dir(c, argv[1]));
      report("plugins", forsetti_embed_config_add_plugins_dir(c, argv[2]));
      report("state", forsetti_embed_config_set_state_dir(c, argv[3]));
      report("in-process", forsetti_embed_config_set_in_process(c, true));
      report("set-unknown", forsetti_embed_config_set(c, "memory-limt", "64"));
      report("set-range", forsetti_embed_config_set(c, "memory-limit", "99999999"));
      report("set-text", forsetti_embed_config_set(c, "max-restarts", "many"));
      report("set-null-key", forsetti_embed_config_set(c, NULL, "1"));
      report("set-application", forsetti_embed_config_set(c, "application-id", "com.example.refusals"));
      report("null-host-out", forsetti_embed_host_new(c, NULL));
      report("host", forsetti_embed_host_new(c, &h));
      forsetti_embed_config_delete(c);

      int32_t status = 0;
      uint8_t *response = NULL;
      size_t length = 0;
      report("call-before-start",
             forsetti_embed_host_call(h, "shared_database", "get", "k", 1, &status, &response, &length));
      report("run-before-start", forsetti_embed_host_run(h, 1, false, NULL));
      report("start", forsetti_embed_host_start(h));
      report("start-twice", forsetti_embed_host_start(h));
      report("unknown-role", forsetti_embed_host_call(h, "printer", "get", "k", 1, &status, &response, &length));
      report("ui-role", forsetti_embed_host_call(h, "ui", "get", "k", 1, &status, &response, &length));
      report("empty-method", forsetti_embed_host_call(h, "shared_database", "", "k", 1, &status, &response, &length));
      report("null-request",
             forsetti_embed_host_call(h, "shared_database", "get", NULL, 5, &status, &response, &length));
      report("too-large", forsetti_embed_host_call(h, "shared_database", "get", "k", FORSETTI_ROLE_MAX_PAYLOAD + 1,
                                                   &status, &response, &length));
      report("null-status", forsetti_embed_host_call(h, "shared_database", "get", "k", 1, NULL, &response, &length));
      report("nan-seconds", forsetti_embed_host_run(h, NAN, false, NULL));
      report("huge-seconds", forsetti_embed_host_run(h, 1e300, false, NULL));
      report("negative-seconds", forsetti_embed_host_run(h, -5, false, NULL));
      pthread_t other;
      if (pthread_create(&other, NULL, from_another_thread, h) != 0) return 3;
      pthread_join(other, NULL);
      int fd = -1;
      report("fd", forsetti_embed_host_fd(h, &fd));
      printf("fd-valid %d\n", fd >= 0);
      report("null-fd", forsetti_embed_host_fd(h, NULL));
      int32_t ending = 0;
      report("run", forsetti_embed_host_run(h, 0.05, false, &ending));
      printf("ending %d\n", (int)ending);
      pthread_t thread;
      if (pthread_create(&thread, NULL, stopper, h) != 0) return 3;
      report("run-until-stopped", forsetti_embed_host_run(h, FORSETTI_EMBED_NO_DEADLINE, false, &ending));
      atomic_store(&run_ended, true);
      pthread_join(thread, NULL);
      printf("stopped-ending %d\n", (int)ending);
      int64_t due = -2;
      report("next-due", forsetti_embed_host_next_due(h, &due));
      printf("due-known %d\n", due >= -1);
      report("process", forsetti_embed_host_process(h));
      report("null-host", forsetti_embed_host_start(NULL));
      report("null-milliseconds", forsetti_embed_host_next_due(h, NULL));
      printf("null-error [%s] %d\n", forsetti_embed_error_message(NULL), (int)forsetti_embed_error_code(NULL));
      forsetti_embed_error_delete(NULL);
      forsetti_embed_config_delete(NULL);
      forsetti_embed_host_delete(NULL);
      forsetti_embed_bytes_delete(NULL);
      report("stop", forsetti_embed_host_stop(h));
      report("call-after-stop",
             forsetti_embed_host_call(h, "shared_database", "get", "k", 1, &status, &response, &length));
      forsetti_embed_host_delete(h);
      printf("end\n");
      return 0;
    }
    """#
}
