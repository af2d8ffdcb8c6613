import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

/// `forsetti-host run` and the verbs that look at a running host, as real processes.
@Suite(.onTestThreads) struct RunCommandTests {
  let dir = TemporaryDirectory("run")

  /// The bundled examples in `dir/plugins`.
  func installExamples() throws -> String { try ExampleModules.install(in: dir) }

  var manifests: String { (HostBinary.packageRoot as NSString).appendingPathComponent("manifests") }

  @Test func theExamplesStartDoTheirWorkAndStopCleanly() throws {
    let plugins = try installExamples()
    let args = [
      "run", "--manifests", manifests, "--plugins", plugins, "--state", dir.url("state"), "--approve-all",
      "--for", "1.5",
    ]
    let first = try HostBinary.run(args)
    #expect(first.status == 0, "\(first.stdout)\(first.stderr)")
    for line in [
      "[module=com.example.counter] start number 1",
      "[module=com.example.helloc] hello from C, greeting number 1",
      "[module=com.example.dashboard] message hello.greeting from com.example.helloc",
      "[module=com.example.dashboard] first tick from com.example.counter",
      "[module=com.example.helloc] C module got its first tick from com.example.counter",
      "\(ExampleModules.moduleIDs.count) modules: \(ExampleModules.moduleIDs.count) ran and stopped cleanly, 0 blocked, 0 failed",
      // The first line says what confinement the kernel offers.
      "[host] isolation: landlock ABI",
    ] {
      #expect(first.stdout.contains(line), "missing: \(line)")
    }
    // The counter's storage survives a restart.
    let second = try HostBinary.run(args + ["--json"])
    #expect(second.status == 0)
    #expect(second.stderr.contains("[module=com.example.counter] start number 2"))
    #expect(second.stderr.contains("greeting number 2"))
    let modules = try #require(try JSONParser.parse(second.stdout).objectValue?["modules"]?.arrayValue)
    #expect(
      modules.compactMap { $0.objectValue?["state"]?.stringValue }
        == ExampleModules.moduleIDs.map { _ in "stopped" })
    let telemetry = try String(contentsOfFile: dir.url("state/logs/telemetry.jsonl"), encoding: .utf8)
    #expect(telemetry.split(separator: "\n").count == 2)
    #expect(telemetry.contains(#""event":"counter.started","attributes":{"starts":2}"#))
  }

  @Test func aBlockedModulesConstructorNeverRuns() throws {
    // Inside the module's own sandbox, the one place a confined worker may write.
    let marker = dir.url("state/sandboxes/com.test.ctor/constructor-ran")
    var f = ModuleFixture(moduleID: "com.test.ctor", entryPoint: "ctor_entry")
    f.prelude = """
      __attribute__((constructor)) static void ran(void) {
        int fd = open("\(marker)", O_WRONLY | O_CREAT, 0644);
        if (fd >= 0) close(fd);
      }
      """
    try f.install(in: dir, capabilities: ["storage"])
    // The directory exists up front, so a constructor that ran would leave the marker.
    try FileManager.default.createDirectory(
      atPath: dir.url("state/sandboxes/com.test.ctor"), withIntermediateDirectories: true)
    let common = [
      "run", "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state",
      dir.url("state"), "--for", "0",
    ]
    let blocked = try HostBinary.run(common)
    #expect(blocked.status == 1)
    #expect(blocked.stdout.contains("approvalPending"))
    #expect(!FileManager.default.fileExists(atPath: marker))
    // The control: once approved, loading runs the constructor, so the check above can fail.
    let approved = try HostBinary.run(common + ["--approve-all"])
    #expect(approved.status == 0, "\(approved.stdout)")
    #expect(FileManager.default.fileExists(atPath: marker))
  }

  /// `--for 0` stops at once, so it watches nothing (a watch costs the kernel a grace period to
  /// remove when the host exits) and runs its modules as ever; any other `--for` watches.
  @Test func runForZeroWatchesNothingAndStillRunsItsModules() throws {
    try ModuleFixture(moduleID: "com.test.once", entryPoint: "once_entry").install(in: dir)
    let common = [
      "run", "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state",
      dir.url("state"), "--approve-all",
    ]
    let once = try HostBinary.run(common + ["--for", "0"])
    #expect(once.status == 0, "\(once.stdout)\(once.stderr)")
    #expect(once.stdout.contains("[host] started com.test.once"), "\(once.stdout)")
    #expect(once.stdout.contains("1 module: 1 ran and stopped cleanly"), "\(once.stdout)")
    #expect(!once.stdout.contains("[host] watching"), "\(once.stdout)")
    // The control: a host that runs on watches, so the check above can fail.
    let watched = try HostBinary.run(common + ["--for", "0.1"])
    #expect(watched.status == 0, "\(watched.stdout)\(watched.stderr)")
    #expect(watched.stdout.contains("[host] watching"), "\(watched.stdout)")
  }

  @Test func badBinariesAreReportedAndTheRestRuns() throws {
    try ModuleFixture(moduleID: "com.test.fine", entryPoint: "fine_entry").install(in: dir)
    try dir.write(
      "manifests/lost.json", ModuleFixture(moduleID: "com.test.lost", entryPoint: "lost_entry").manifest())
    try dir.write("plugins/text.so", "#!/bin/sh\necho not a library\n")
    let fine = try Data(contentsOf: URL(fileURLWithPath: dir.url("plugins/fine_entry.so")))
    try dir.write("plugins/cut.so", bytes: Array(fine.prefix(fine.count / 3)))
    let r = try HostBinary.run([
      "run", "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state",
      dir.url("state"),
      "--approve-all", "--for", "0", "--json",
    ])
    #expect(r.status == 1)
    let modules = try #require(try JSONParser.parse(r.stdout).objectValue?["modules"]?.arrayValue).compactMap(
      \.objectValue)
    let byID = Dictionary(uniqueKeysWithValues: modules.map { ($0["moduleID"]?.stringValue ?? "", $0) })
    #expect(byID["com.test.fine"]?["state"]?.stringValue == "stopped")
    #expect(byID["com.test.lost"]?["state"]?.stringValue == "blocked")
    #expect(byID["com.test.lost"]?["reason"]?.stringValue == "invalidBinary")
    let detail =
      byID["com.test.lost"]?["trace"]?.arrayValue?.compactMap { $0.objectValue?["detail"]?.stringValue }
      .joined() ?? ""
    #expect(detail.contains("cut.so") && detail.contains("truncated"))
    #expect(detail.contains("text.so") && detail.contains("not an ELF file"))
  }

  @Test func surfaceListAndExplainSeeTheRunningHostWhichStopsOnSIGTERM() throws {
    let plugins = try installExamples()
    let state = dir.url("state")
    let host = Process()
    host.executableURL = URL(fileURLWithPath: HostBinary.path)
    host.arguments = [
      "run", "--manifests", manifests, "--plugins", plugins, "--state", state, "--approve-all",
    ]
    let out = Pipe()
    host.standardOutput = out
    host.standardError = FileHandle.nullDevice
    try host.run()
    defer { if host.isRunning { host.terminate() } }

    var surface: JSONObject?
    // Polled for at least 30 s: the host publishes it at once when idle, later when busy.
    for _ in 0..<600 {
      let r = try HostBinary.run(["surface", "--state", state, "--json"])
      if r.status == 0, let o = try? JSONParser.parse(r.stdout).objectValue,
        o["toolbarItems"]?.arrayValue?.isEmpty == false
      {
        surface = o
        break
      }
      usleep(50_000)
    }
    let s = try #require(surface, "the running host never published its surface")
    #expect(s["running"] == .bool(true))
    #expect(s["toolbarItems"]?.arrayValue?.first?.objectValue?["itemID"]?.stringValue == "dashboard.refresh")
    #expect(s["viewInjections"]?.arrayValue?.first?.objectValue?["slotID"]?.stringValue == "main.sidebar")

    let list = try HostBinary.run([
      "list", "--manifests", manifests, "--state", state, "--approve-all", "--json",
    ])
    let rows = try #require(try JSONParser.parse(list.stdout).objectValue?["modules"]?.arrayValue).compactMap(
      \.objectValue)
    #expect(rows.map { $0["runState"]?.stringValue } == ExampleModules.moduleIDs.map { _ in "started" })

    let explain = try HostBinary.run([
      "explain", "com.example.dashboard", "--manifests", manifests, "--plugins", plugins, "--state", state,
      "--approve-all",
    ])
    #expect(explain.status == 0)
    #expect(explain.stdout.contains("PASS    inspectBinary"))
    #expect(explain.stdout.contains("in the running host (pid \(host.processIdentifier)): started"))

    kill(host.processIdentifier, SIGTERM)
    let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    host.waitUntilExit()
    #expect(host.terminationStatus == 0)
    #expect(text.contains("stopping all modules (SIGTERM)"))
    #expect(
      text.contains(
        "\(ExampleModules.moduleIDs.count) modules: \(ExampleModules.moduleIDs.count) ran and stopped cleanly"
      ))
    let after = try HostBinary.run(["surface", "--state", state, "--json"])
    #expect(after.status == 1)
    #expect(try JSONParser.parse(after.stdout).objectValue?["running"] == .bool(false))
  }

  /// By default workers are forked by the host's zygote; `--no-zygote` spawns each, and then
  /// no zygote runs.
  @Test(arguments: [false, true]) func workersAreForkedUnlessNoZygoteIsGiven(noZygote: Bool) throws {
    let plugins = try installExamples()
    let host = try DevHost.launch(
      [
        "run", "--manifests", manifests, "--plugins", plugins, "--state", dir.url("state-\(noZygote)"),
        "--approve-all",
      ] + (noZygote ? ["--no-zygote"] : []))
    defer { host.stop() }
    for id in ExampleModules.moduleIDs {
      try #require(host.await("started \(id)") != nil, "\(host.lines)")
    }
    let hostPID = host.process.processIdentifier
    let children = Self.children(of: hostPID)
    let workers = Self.workers(of: hostPID)
    #expect(workers.count == ExampleModules.moduleIDs.count, "workers: \(workers)")
    #expect(children.count == workers.count + (noZygote ? 0 : 1), "children: \(children)")
    for worker in workers {
      let argv = (try? String(contentsOfFile: "/proc/\(worker)/cmdline", encoding: .utf8)) ?? ""
      #expect(argv.hasSuffix(noZygote ? "--await-config\0" : "--worker\0"), "\(worker): \(argv)")
    }
  }

  /// Ctrl-C at a terminal signals the whole foreground process group. The workers must not be
  /// in it: the host alone stops them, in order, and the run ends cleanly.
  @Test func aCtrlCToTheHostsProcessGroupStopsEveryModuleCleanly() throws {
    let plugins = try installExamples()
    // Foundation's Process makes the host a process group leader, as a shell makes a job.
    let host = try DevHost.launch([
      "run", "--manifests", manifests, "--plugins", plugins, "--state", dir.url("state"), "--approve-all",
    ])
    defer { host.stop() }
    for id in ExampleModules.moduleIDs {
      try #require(host.await("started \(id)") != nil, "\(host.lines)")
    }
    let hostPID = host.process.processIdentifier
    #expect(getpgid(hostPID) == hostPID)
    // The test runner may ignore SIGINT, and an ignored signal stays ignored in the workers, so
    // the signal alone would not show the fault: look at their process groups too.
    let workers = Self.workers(of: hostPID)
    #expect(workers.count == ExampleModules.moduleIDs.count, "workers: \(workers)")
    // Nor the zygote that forks them.
    let children = Self.children(of: hostPID)
    #expect(children.count == workers.count + 1, "children: \(children), workers: \(workers)")
    for child in children { #expect(getpgid(child) != hostPID, "process \(child) is in the host's group") }
    kill(-hostPID, SIGINT)
    host.process.waitUntilExit()
    // The exit can be seen before the reading thread has the last lines: wait for the summary.
    _ = host.await("ran and stopped")
    let text = host.lines.joined(separator: "\n")
    #expect(host.process.terminationStatus == 0, "\(text)")
    #expect(
      text.contains(
        "\(ExampleModules.moduleIDs.count) modules: \(ExampleModules.moduleIDs.count) ran and stopped cleanly"
      ),
      "\(text)")
    #expect(!text.contains("killed by signal"), "\(text)")
  }

  /// The processes whose parent is `pid`, from /proc.
  /// The host's workers: its children but the zygote (`forsetti-worker --zygote`).
  static func workers(of pid: pid_t) -> [pid_t] {
    children(of: pid).filter { child in
      let argv = (try? String(contentsOfFile: "/proc/\(child)/cmdline", encoding: .utf8)) ?? ""
      return !argv.hasSuffix("--zygote\0")
    }
  }

  static func children(of pid: pid_t) -> [pid_t] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap { name -> pid_t? in
      guard let child = pid_t(name),
        let stat = try? String(contentsOfFile: "/proc/\(name)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
      else { return nil }
      // After "pid (comm) ": state, then the parent's pid.
      let fields = stat[stat.index(after: close)...].split(separator: " ")
      return fields.count > 1 && pid_t(fields[1]) == pid ? child : nil
    }
  }

  @Test func inspectReportsWithoutLoading() throws {
    let marker = dir.url("loaded")
    var f = ModuleFixture(moduleID: "com.test.look", entryPoint: "look_entry")
    f.prelude = """
      __attribute__((section(".forsetti.manifest"), used)) static const char m[] = "{\\"moduleID\\":\\"com.test.look\\"}";
      __attribute__((constructor)) static void ran(void) { int fd = open("\(marker)", O_WRONLY | O_CREAT, 0644); if (fd >= 0) close(fd); }
      """
    let so = try f.install(in: dir)
    let r = try HostBinary.run(["inspect", so, "--json"])
    #expect(r.status == 0)
    let o = try #require(try JSONParser.parse(r.stdout).objectValue)
    #expect(o["exportedFunctions"]?.arrayValue?.contains(.string("look_entry")) == true)
    #expect(o["embeddedManifest"]?.objectValue?["moduleID"]?.stringValue == "com.test.look")
    #expect(o["matchesHost"] == .bool(true))
    #expect(!FileManager.default.fileExists(atPath: marker))
    let text = try HostBinary.run(["inspect", dir.url("manifests/look_entry.json")])
    #expect(text.status == 1)
    #expect(text.stdout.contains("not an ELF file"))
  }

  @Test func isolationOptionsAreAcceptedAndTakeEffect() throws {
    // The module names its parent: the host when it runs in a worker, this test when in-process.
    var f = ModuleFixture(moduleID: "com.test.where", entryPoint: "where_entry")
    f.start = """
      char line[64];
      snprintf(line, sizeof line, "parent %d", (int)getppid());
      fixture_log(line);
      return FORSETTI_OK;
      """
    try f.install(in: dir)
    var slow = ModuleFixture(moduleID: "com.test.slow", entryPoint: "slow_entry")
    slow.start = "sleep(30); return FORSETTI_OK;"
    try slow.install(in: dir)
    let common = [
      "run", "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state",
      dir.url("state"), "--approve-all", "--for", "0", "--json",
    ]
    let here = "parent \(ProcessInfo.processInfo.processIdentifier)"

    let isolated = try HostBinary.run(
      common + ["--start-timeout", "0.5", "--memory-limit", "256", "--max-restarts", "0"])
    #expect(isolated.status == 1, "\(isolated.stderr)")
    #expect(isolated.stderr.contains("[module=com.test.where] parent "))
    #expect(!isolated.stderr.contains(here + "\n"))
    let modules = try #require(try JSONParser.parse(isolated.stdout).objectValue?["modules"]?.arrayValue)
    let slowRow = try #require(
      modules.compactMap(\.objectValue).first { $0["moduleID"] == .string("com.test.slow") })
    #expect(slowRow["reason"]?.stringValue == "startTimedOut")
    #expect(isolated.stdout.contains("did not finish within 0.5 s"))

    try FileManager.default.removeItem(atPath: dir.url("plugins/slow_entry.so"))
    try FileManager.default.removeItem(atPath: dir.url("manifests/slow_entry.json"))
    let inProcess = try HostBinary.run(common + ["--in-process"])
    #expect(inProcess.status == 0, "\(inProcess.stdout)\(inProcess.stderr)")
    #expect(inProcess.stderr.contains("[module=com.test.where] \(here)"))
    #expect(!inProcess.stderr.contains("[host] isolation:"))

    let bad = try HostBinary.run(common + ["--memory-limit", "lots"])
    #expect(bad.status == 2)
    #expect(bad.stderr.contains("--memory-limit") || bad.stderr.contains("memory-limit"))
    let help = try HostBinary.run(["run", "--help"])
    for option in [
      "--in-process", "--start-timeout", "--stop-timeout", "--memory-limit", "--cpu-limit", "--max-restarts",
      "--log-rate", "--log-burst", "--log-file-size", "--log-files",
    ] {
      #expect(help.stdout.contains(option), "run --help does not list \(option)")
    }
    // A log limit out of its range is a usage error that names the option, the range with its
    // unit and the value the setting got; one given in another unit than its range says so.
    for (option, value, says) in [
      ("log-rate", "0.5", "expected 1 to 1000000 lines a second, not 0"),
      ("log-burst", "0", "expected 1 to 10000000 lines, not 0"),
      ("log-file-size", "0.001", "bytes (4 KiB to 1 TiB), not 1048 (log-file-size is given in MiB)"),
      ("log-files", "0", "expected 1 to 1000 files, not 0"),
    ] {
      let r = try HostBinary.run(common + ["--\(option)", value])
      #expect(r.status == 2, "--\(option) \(value): \(r.stderr)")
      #expect(r.stderr.contains("'--\(option)'") && r.stderr.contains(says), "\(r.stderr)")
    }
    let debounce = try HostBinary.run(["dev"] + common.dropFirst() + ["--debounce", "2e12"])
    #expect(
      debounce.status == 2 && debounce.stderr.contains("(debounce is given in milliseconds)"),
      "\(debounce.stderr)")
    let noManifests = try HostBinary.run([
      "run", "--manifests", dir.url("no-such-dir"), "--plugins", dir.url("plugins"), "--state",
      dir.url("state"),
      "--for", "0",
    ])
    #expect(noManifests.status == 2, "\(noManifests.stderr)")
    #expect(
      noManifests.stderr.contains("--manifests \(dir.url("no-such-dir")): no such directory"),
      "\(noManifests.stderr)")
  }

  @Test func runWithoutBuiltPluginsSaysWhatToDo() throws {
    let r = try HostBinary.run(["run", "--manifests", manifests, "--for", "0"], in: dir.path)
    #expect(r.status == 2)
    #expect(r.stderr.contains("scripts/build-plugins"))
  }

  /// Issue 40: under systemd's default soft limit of 1024 open files the page fell to 600
  /// half-open connections. `run` raises its soft limit to the hard one at start: started under
  /// `prlimit --nofile=1024:8192`, its /proc limits read 8192 soft (the control: prlimit did set
  /// 1024 for a program that does not raise it, `cat`).
  @Test func runRaisesItsOpenFileLimitToTheHardOne() throws {
    let control = try ProcessRunner.run(
      "/usr/bin/prlimit", ["--nofile=1024:8192", "/bin/sh", "-c", "ulimit -n"])
    #expect(control.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "1024", "\(control)")
    try FileManager.default.createDirectory(atPath: dir.url("manifests"), withIntermediateDirectories: true)
    try FileManager.default.createDirectory(atPath: dir.url("plugins"), withIntermediateDirectories: true)
    let host = try DevHost(
      [
        "--nofile=1024:8192", HostBinary.path, "run", "--manifests", dir.url("manifests"), "--plugins",
        dir.url("plugins"), "--state", dir.url("state"), "--for", "60",
      ], verb: nil, executable: "/usr/bin/prlimit")
    defer { host.stop() }
    // Any line of the host's: it is running past its start, where the limit is raised.
    try #require(host.await("[host] ", timeout: 60) != nil, "\(host.lines)")
    let limits =
      (try? String(contentsOfFile: "/proc/\(host.process.processIdentifier)/limits", encoding: .utf8)) ?? ""
    let line = limits.split(separator: "\n").first { $0.hasPrefix("Max open files") }.map(String.init) ?? ""
    let numbers = line.split(separator: " ").compactMap { Int($0) }
    #expect(numbers == [8192, 8192], "\(line)")
  }
}
