import ForsettiTestSupport
import Foundation
import Testing

/// The debug screen against the browser and the network (issue 26), in headless Chromium driven
/// by Tests/browser/debug_screen_survival.py: two hosts' pages side by side in one browser, no
/// credential sent to another port of 127.0.0.1, a restarted host's page saying so, the page
/// reachable during 40 half-open connections and with 1,000 event-stream clients (the script
/// raises its own RLIMIT_NOFILE for them), destructive actions confirmed, only the actions that
/// apply offered, display names shown, live events filtered and paused.
@Suite(.onTestThreads) struct DebugScreenSurvivalTests {
  let dir = TemporaryDirectory("debug-survival")

  /// A service that logs `TAG #N` every `everyMs` milliseconds from a thread of its own.
  static func logger(_ id: String, entry: String, tag: String, everyMs: Int) -> ModuleFixture {
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.prelude = """
      #include <pthread.h>
      static volatile int g_stop;
      static pthread_t g_thread;
      static void *repeat(void *a) {
        (void)a; char line[128];
        for (unsigned n = 0; !g_stop; n++) {
          snprintf(line, sizeof line, "\(tag) #%u", n);
          g_host->log(FORSETTI_LOG_INFO, line);
          for (int k = 0; k < \(everyMs / 10) && !g_stop; k++) usleep(10000);
        }
        return NULL;
      }
      """
    f.start = "pthread_create(&g_thread, NULL, repeat, NULL); return FORSETTI_OK;"
    f.stop = "g_stop = 1; pthread_join(g_thread, NULL);"
    return f
  }

  /// Installs `f` with `name` as its display name (the fixture's manifest names it by its ID).
  func install(_ f: ModuleFixture, name: String, capabilities: [String] = [], manifests: String = "manifests")
    throws
  {
    try f.install(in: dir, capabilities: capabilities)
    let manifest = f.manifest(capabilities: capabilities).replacingOccurrences(
      of: "\"displayName\":\"\(f.moduleID)\"", with: "\"displayName\":\"\(name)\"")
    try dir.write("\(manifests)/\(f.entryPoint).json", manifest)
  }

  @Test(.timeLimit(.minutes(10)))
  func thePageSurvivesTheBrowserAndTheNetwork() throws {
    let missing = try DebugScreenBrowserTests.missingPrerequisites()
    #expect(
      missing.isEmpty,
      "the browser test needs \(missing.joined(separator: ", ")); \(DebugScreenBrowserTests.install)")
    guard missing.isEmpty else { return }

    // Host A: a chatty module, a quiet one, one waiting for approval, and a manifest that does
    // not validate. Host B: the quiet one alone.
    let quiet = Self.logger("com.test.quiet", entry: "quiet_entry", tag: "quiet", everyMs: 700)
    try install(
      Self.logger("com.test.chatty", entry: "chatty_entry", tag: "chatty", everyMs: 100),
      name: "Chatty Logger")
    try install(quiet, name: "Quiet One")
    try install(
      ModuleFixture(moduleID: "com.test.pending", entryPoint: "pending_entry"), name: "Needs Approval",
      capabilities: ["telemetry"])
    try dir.write(
      "manifests/broken.json",
      #"{"schemaVersion":"1.0","moduleID":"com.test.broken","displayName":"Broken","moduleType":"service"}"#)
    try dir.write(
      "manifests-b/quiet_entry.json",
      quiet.manifest().replacingOccurrences(
        of: "\"displayName\":\"com.test.quiet\"", with: "\"displayName\":\"Quiet One\""))

    let root = HostBinary.packageRoot as NSString
    let r = try ProcessRunner.run(
      "/usr/bin/env",
      [
        "python3", root.appendingPathComponent("Tests/browser/debug_screen_survival.py"),
        "--host", HostBinary.path, "--plugins", dir.url("plugins"),
        "--manifests-a", dir.url("manifests"), "--state-a", dir.url("state-a"),
        "--manifests-b", dir.url("manifests-b"), "--state-b", dir.url("state-b"),
        "--chromium", DebugScreenBrowserTests.chromium, "--chromedriver",
        DebugScreenBrowserTests.chromedriver,
      ])
    #expect(r.status == 0, "debug_screen_survival.py exited \(r.status):\n\(r.stdout)\n\(r.stderr)")
    if r.status == 0 { #expect(r.stdout.contains("PASS: the page survives"), "\(r.stdout)") }
    // FORSETTI_SHOW=1 prints the script's report (its checks and the numbers it measured).
    if ProcessInfo.processInfo.environment["FORSETTI_SHOW"] == "1" { print(r.stdout) }
  }
}
