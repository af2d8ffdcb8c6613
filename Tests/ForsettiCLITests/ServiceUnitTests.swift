import ForsettiCore
import ForsettiTestSupport
import Foundation
import Synchronization
import Testing

/// The host as a systemd service, without a service manager: no systemd runs as PID 1 here or
/// in CI (a container's PID 1 is its runner), so the example unit cannot be started for real.
/// What can be checked is checked: the installed unit with `systemd-analyze verify`, and the
/// unit's own command line run by hand with what systemd would give it — `$JOURNAL_STREAM`
/// naming the pipe its output goes to, `$NOTIFY_SOCKET` a datagram socket.
@Suite(.onTestThreads) struct ServiceUnitTests {
  let dir = TemporaryDirectory("service")

  static let unitSource = HostBinary.packageRoot + "/docs/forsetti-host.service"
  /// The unit's configuration file, as scripts/install installs it (with its paths moved).
  static let configSource = HostBinary.packageRoot + "/docs/host.conf"
  static let moduleID = "com.test.svc"

  /// The unit's settings, `Key=value` lines (a repeated key keeps its last value, as systemd's
  /// list-valued keys in this unit are not repeated).
  static func settings(_ text: String) -> [String: String] {
    var out: [String: String] = [:]
    for line in text.split(separator: "\n") where !line.hasPrefix("#") && !line.hasPrefix("[") {
      guard let eq = line.firstIndex(of: "=") else { continue }
      out[String(line[..<eq])] = String(line[line.index(after: eq)...])
    }
    return out
  }

  static var systemdAnalyze: String? {
    ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].first {
      FileManager.default.isExecutableFile(atPath: $0)
    }
  }

  /// `systemd-analyze verify` of `unit`: its complaints about that file (it also loads the units
  /// the file refers to; what it says of those is not ours).
  static func verify(_ analyze: String, _ unit: String) throws -> (status: Int32, complaints: [String]) {
    let r = try ProcessRunner.run(analyze, ["verify", "--man=no", unit])
    let name = (unit as NSString).lastPathComponent
    let complaints = (r.stdout + r.stderr).split(separator: "\n").map(String.init).filter {
      $0.contains(name)
    }
    return (r.status, complaints)
  }

  /// The value after `option` in a command line of single-space-separated words.
  static func value(of option: String, in commandLine: String) -> String? {
    let words = commandLine.split(separator: " ").map(String.init)
    guard let i = words.firstIndex(of: option), i + 1 < words.count else { return nil }
    return words[i + 1]
  }

  /// The `option = value` lines of a configuration file (the last of a repeated option).
  static func options(_ text: String) -> [String: String] {
    var out: [String: String] = [:]
    for line in text.split(separator: "\n") where !line.hasPrefix("#") {
      let parts = line.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
      if parts.count == 2 { out[parts[0]] = parts[1] }
    }
    return out
  }

  /// The options of the configuration file `exec` names with --config, read under `root`.
  static func configuration(of exec: String, under root: String = "") throws -> [String: String] {
    let path = try #require(value(of: "--config", in: exec), "\(exec)")
    return options(try String(contentsOfFile: root + path, encoding: .utf8))
  }

  /// Runs scripts/install with the binaries these tests run; nil when it succeeded, else what
  /// it printed.
  func install(_ arguments: [String]) throws -> String? {
    let binDir = (HostBinary.path as NSString).deletingLastPathComponent
    let r = try ProcessRunner.run(
      "/usr/bin/env",
      ["bash", HostBinary.packageRoot + "/scripts/install", "--bin-dir", binDir] + arguments)
    return r.status == 0 ? nil : r.stdout + r.stderr
  }

  /// `path` is a directory with mode 0755 and nothing in it.
  func expectEmptyDirectory(_ path: String) {
    var isDirectory: ObjCBool = false
    #expect(
      FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue,
      "\(path)")
    let mode = (try? FileManager.default.attributesOfItem(atPath: path))?[.posixPermissions] as? Int
    #expect(mode == 0o755, "\(path): mode \(mode.map { String($0, radix: 8) } ?? "none")")
    #expect((try? FileManager.default.contentsOfDirectory(atPath: path)) == [], "\(path)")
  }

  /// One layout everywhere: installed with PREFIX=/usr, as scripts/package stages the Debian
  /// package, the unit runs the host on exactly the directories of `SystemLayout.debian`, where
  /// `forsetti-host pack`'s module packages install, and the install creates them (so the host
  /// package ships and owns them), with the vendors' key directory beside them.
  @Test func installedIntoUsrTheUnitRunsTheModulesWhereModulePackagesInstallThem() throws {
    let root = dir.url("root")
    let failed = try install(["--prefix", "/usr", "--destdir", root])
    try #require(failed == nil, "install failed: \(failed ?? "")")
    let unit = try String(
      contentsOfFile: root + "/usr/lib/systemd/system/forsetti-host.service", encoding: .utf8)
    let exec = try #require(Self.settings(unit)["ExecStart"])
    let layout = SystemLayout.debian
    #expect(exec.hasPrefix("/usr/bin/forsetti-host run "), "\(exec)")
    // Staged as /usr/etc/forsetti/host.conf; scripts/package moves it to /etc (a conffile).
    let config = try Self.configuration(of: exec, under: root)
    #expect(config["manifests"] == layout.manifests, "\(config)")
    #expect(config["plugins"] == layout.plugins, "\(config)")
    #expect(Self.value(of: "--state", in: exec) == "/var/lib/forsetti", "\(exec)")
    for directory in [layout.manifests, layout.plugins, layout.vendorKeys] {
      expectEmptyDirectory(root + directory)
    }
  }

  /// With another prefix the module directories follow it; they are recorded, so --uninstall
  /// removes them when empty and keeps them, with the module in them, when not.
  @Test func theModuleDirectoriesFollowThePrefixAndUninstallKeepsAModuleInThem() throws {
    let prefix = dir.url("local")
    let failed = try install(["--prefix", prefix])
    try #require(failed == nil, "install failed: \(failed ?? "")")
    let unit = try String(
      contentsOfFile: prefix + "/lib/systemd/system/forsetti-host.service", encoding: .utf8)
    let exec = try #require(Self.settings(unit)["ExecStart"])
    #expect(Self.value(of: "--config", in: exec) == prefix + "/etc/forsetti/host.conf", "\(exec)")
    let config = try Self.configuration(of: exec)
    let manifests = try #require(config["manifests"])
    let plugins = try #require(config["plugins"])
    #expect(
      manifests == prefix + "/lib/forsetti/manifests" && plugins == prefix + "/lib/forsetti/plugins",
      "\(config)")
    expectEmptyDirectory(manifests)
    expectEmptyDirectory(plugins)
    expectEmptyDirectory(prefix + "/share/forsetti/keys")

    try dir.write("local/lib/forsetti/plugins/libmine.so", "an operator's module")
    let uninstall = try ProcessRunner.run(
      "/usr/bin/env",
      ["bash", HostBinary.packageRoot + "/scripts/install", "--uninstall", "--prefix", prefix])
    #expect(uninstall.status == 0, "\(uninstall.stderr)")
    #expect(FileManager.default.fileExists(atPath: plugins + "/libmine.so"))
    #expect(!FileManager.default.fileExists(atPath: manifests), "empty, so removed")
    #expect(uninstall.stdout.contains("kept    \(plugins)/ (not empty)"), "\(uninstall.stdout)")
  }

  @Test func theInstalledUnitPassesSystemdAnalyzeVerify() throws {
    let prefix = dir.url("prefix")
    let binDir = (HostBinary.path as NSString).deletingLastPathComponent
    let install = try ProcessRunner.run(
      "/usr/bin/env",
      ["bash", HostBinary.packageRoot + "/scripts/install", "--prefix", prefix, "--bin-dir", binDir])
    try #require(install.status == 0, "install failed: \(install.stderr)")
    let unit = prefix + "/lib/systemd/system/forsetti-host.service"
    let installed = try String(contentsOfFile: unit, encoding: .utf8)
    let exec = try #require(Self.settings(installed)["ExecStart"])
    #expect(exec.hasPrefix(prefix + "/bin/forsetti-host run "), "\(exec)")
    #expect(
      Self.settings(installed)["ExecReload"] == prefix
        + "/bin/forsetti-host upgrade --state /var/lib/forsetti",
      "\(installed)")
    #expect(!installed.contains("/usr/local/"), "every path under the prefix")
    let config = try String(contentsOfFile: prefix + "/etc/forsetti/host.conf", encoding: .utf8)
    #expect(!config.contains("/usr/local/"), "every path of its configuration file too")

    guard let analyze = Self.systemdAnalyze else {
      withKnownIssue("systemd-analyze is not installed here (package systemd): the unit was NOT verified") {
        Issue.record("no systemd-analyze")
      }
      return
    }
    let verdict = try Self.verify(analyze, unit)
    #expect(verdict.status == 0 && verdict.complaints.isEmpty, "\(verdict.complaints)")

    // The check can fail here: a unit with a mistake in it is reported (systemd-analyze only
    // warns about an unknown value, with status 0; the complaint is what counts).
    let broken = dir.url("broken/forsetti-host.service")
    try dir.write(
      "broken/forsetti-host.service",
      installed.replacingOccurrences(of: "KillMode=mixed", with: "KillMode=sometimes"))
    #expect(try Self.verify(analyze, broken).complaints.contains { $0.contains("kill mode") })
  }

  /// What the unit promises the host, kept true: the comments in the unit explain each.
  @Test func theUnitKeepsWhatTheHostNeeds() throws {
    let s = Self.settings(try String(contentsOfFile: Self.unitSource, encoding: .utf8))
    #expect(s["Type"] == "notify")
    #expect(s["NotifyAccess"] == "main")
    let exec = try #require(s["ExecStart"])
    #expect(
      exec.hasSuffix(" run --config /usr/local/etc/forsetti/host.conf --state /var/lib/forsetti"), "\(exec)")
    let config = Self.options(try String(contentsOfFile: Self.configSource, encoding: .utf8))
    #expect(config["manifests"] != nil && config["plugins"] != nil, "\(config)")
    #expect(!exec.contains("--approve-all") && config["approve-all"] == nil)
    // `systemctl reload` (a package upgrade) upgrades the host ExecStart= runs: the same
    // executable, asked on the same state directory.
    let reload = try #require(s["ExecReload"])
    let executable = try #require(exec.split(separator: " ").first.map(String.init))
    #expect(reload.hasPrefix(executable + " upgrade "), "\(reload)")
    #expect(
      Self.value(of: "--state", in: reload) == Self.value(of: "--state", in: exec)
        && reload.contains("--state"),
      "\(reload)")
    #expect(config["state"] == nil, "the state directory is the unit's (StateDirectory=), not every user's")
    #expect(s["StateDirectory"] == "forsetti")
    #expect(s["Delegate"] == "yes", "workers' cgroups need a delegated subtree")
    #expect(s["KillMode"] == "mixed", "SIGTERM to the host alone: it stops the workers in order")
    #expect(s["KillSignal"] == "SIGTERM")
    #expect(s["Restart"] == "on-failure")
    #expect(s["RestartPreventExitStatus"]?.split(separator: " ").contains("2") == true)
    // Modules stop one at a time: each gets the stop timeout (5 s) and 2 s to be reaped.
    let stopTimeout = try #require(s["TimeoutStopSec"].flatMap { Int($0) })
    #expect(stopTimeout > 5 + 2)
    #expect(s["ProtectControlGroups"] == nil, "it would make /sys/fs/cgroup read-only")
    #expect(s["SystemCallFilter"] == nil && s["MemoryDenyWriteExecute"] == nil && s["PrivateUsers"] == nil)
    let namespaces = Set((s["RestrictNamespaces"] ?? "").split(separator: " ").map(String.init))
    #expect(namespaces.isSuperset(of: ["user", "ipc", "uts", "net"]), "\(namespaces)")
    #expect(s["CapabilityBoundingSet"]?.contains("CAP_SETFCAP") == true, "uid_map of a worker needs it")
  }

  /// A module that logs at every level and tries to forge a syslog priority: after a newline,
  /// after a NUL on its standard output, and all along a long line (the longest a log call
  /// takes, 16 KiB), which journald cuts every LineMax bytes (48 KiB by default, as little as
  /// 79 if so configured) and reads a priority at the start of each piece.
  func installChattyModule() throws {
    var m = ModuleFixture(moduleID: Self.moduleID, entryPoint: "svc_entry")
    m.start = """
      g_host->log(FORSETTI_LOG_INFO, "service info line");
      g_host->log(FORSETTI_LOG_WARNING, "service warning line");
      g_host->log(FORSETTI_LOG_ERROR, "service error line");
      g_host->log(FORSETTI_LOG_INFO, "forged\\n<0>emergency from a module");
      static char big[16000];
      for (size_t i = 0; i + 3 < sizeof big; i += 3) memcpy(big + i, "<0>", 3);
      g_host->log(FORSETTI_LOG_INFO, big);
      static const char raw[] = "nul\\0<1>alert from a module\\n";
      fwrite(raw, 1, sizeof raw - 1, stdout);
      fflush(stdout);
      return FORSETTI_OK;
      """
    try m.install(in: dir)
  }

  /// The unit's ExecStart, with its configuration file, and their directories moved into the
  /// test's, run for a while.
  func unitCommandLine() throws -> [String] {
    let exec = try #require(
      Self.settings(try String(contentsOfFile: Self.unitSource, encoding: .utf8))["ExecStart"])
    let config = try String(contentsOfFile: Self.configSource, encoding: .utf8)
      .replacingOccurrences(of: "/usr/local/lib/forsetti/manifests", with: dir.url("manifests"))
      .replacingOccurrences(of: "/usr/local/lib/forsetti/plugins", with: dir.url("plugins"))
    let configPath = try dir.write("host.conf", config)
    // The executable is left out: the one built for these tests runs.
    let words = exec.split(separator: " ").dropFirst().map { word -> String in
      switch word {
      case "/var/lib/forsetti": dir.url("state")
      case "/usr/local/etc/forsetti/host.conf": configPath
      default: String(word)
      }
    }
    return words + ["--for", "2"]
  }

  /// Runs the host with `environment` added (and systemd's variables of this process removed);
  /// with `journal`, standard output and error share one pipe and `$JOURNAL_STREAM` names it.
  func runHost(_ arguments: [String], journal: Bool, environment: [String: String] = [:]) throws
    -> (status: Int32, stdout: String, stderr: String)
  {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: HostBinary.path)
    p.arguments = arguments
    // These tests read the journal's plain `<N>` lines: a journald running here would get
    // structured entries instead (JournalFieldsTests), so, as root, its socket is hidden.
    let noJournal = TemporaryDirectory("no-journal")
    if journal && geteuid() == 0 {
      p.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
      p.arguments = JournalFieldsTests.namespaced(noJournal.path) + [HostBinary.path] + arguments
    }
    let out = Pipe()
    let err = journal ? out : Pipe()
    var env = ProcessInfo.processInfo.environment
    for k in ["JOURNAL_STREAM", "NOTIFY_SOCKET"] { env[k] = nil }
    if journal {
      // As systemd sets it: the device and inode of the stream, in decimal.
      var st = stat()
      try #require(fstat(out.fileHandleForWriting.fileDescriptor, &st) == 0)
      env["JOURNAL_STREAM"] = "\(UInt64(st.st_dev)):\(UInt64(st.st_ino))"
    }
    env.merge(environment) { $1 }
    p.environment = env
    p.standardOutput = out
    p.standardError = err
    p.standardInput = FileHandle.nullDevice
    try p.run()
    let errText = Mutex("")
    let group = DispatchGroup()
    if !journal {
      group.enter()
      DispatchQueue.global().async {
        let data = err.fileHandleForReading.readDataToEndOfFile()
        errText.withLock { $0 = String(decoding: data, as: UTF8.self) }
        group.leave()
      }
    }
    let watchdog = DispatchWorkItem { [pid = p.processIdentifier] in kill(pid, SIGKILL) }
    DispatchQueue.global().asyncAfter(deadline: .now() + 60, execute: watchdog)
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    group.wait()
    p.waitUntilExit()
    watchdog.cancel()
    withExtendedLifetime(noJournal) {}
    return (p.terminationStatus, String(decoding: outData, as: UTF8.self), errText.withLock { $0 })
  }

  @Test func underTheJournalEveryLogLineCarriesItsPriorityAndNoModuleCanForgeOne() throws {
    try installChattyModule()
    let r = try runHost(try unitCommandLine(), journal: true)
    #expect(r.status == 0, "\(r.stdout.prefix(3000))")
    let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)

    #expect(lines.contains("<6>[module=\(Self.moduleID)] service info line"), "\(r.stdout.prefix(3000))")
    #expect(lines.contains("<4>[module=\(Self.moduleID)] service warning line"))
    #expect(lines.contains("<3>[module=\(Self.moduleID)] service error line"))
    #expect(lines.contains { $0.hasPrefix("<6>[host] stopping all modules") })
    // Every log line starts with a priority of the host's, the level word left out.
    for line in lines where line.contains("[host]") || line.contains("[module=") {
      #expect(["<3>[", "<4>[", "<6>["].contains { line.hasPrefix($0) }, "\(line.prefix(200))")
    }

    // Forgeries: journald cuts records at a newline, a NUL, and every LineMax bytes, and reads
    // `<digit…>` at the start of each. So no NUL at all, and no `<` before a digit anywhere but
    // at the start of a line.
    #expect(!r.stdout.utf8.contains(0))
    for line in lines {
      let rest = line.hasPrefix("<") ? String(line.dropFirst()) : line
      #expect(rest.range(of: #"<[0-9]"#, options: .regularExpression) == nil, "\(line.prefix(200))")
    }
    #expect(lines.contains("<6>[module=\(Self.moduleID)] forged\\n\\u{3c}0>emergency from a module"))
    #expect(
      lines.contains("<6>[module=\(Self.moduleID) stream=output] nul\\u{0}\\u{3c}1>alert from a module"))
    let long = try #require(lines.first { $0.contains("\\u{3c}0>\\u{3c}0>") })
    #expect(long.utf8.count > 16000, "the whole line, \(long.utf8.count) bytes: journald may cut it anywhere")
  }

  @Test func warningsAndErrorsGoToStandardErrorTheRestToStandardOutput() throws {
    try installChattyModule()
    let r = try runHost(try unitCommandLine(), journal: false)
    #expect(r.status == 0, "\(r.stdout.prefix(2000))\(r.stderr.prefix(2000))")
    let out = r.stdout.split(separator: "\n").map(String.init)
    let err = r.stderr.split(separator: "\n").map(String.init)
    #expect(out.contains("info    [module=\(Self.moduleID)] service info line"), "\(r.stdout.prefix(2000))")
    #expect(
      err.contains("warning [module=\(Self.moduleID)] service warning line"), "\(r.stderr.prefix(2000))")
    #expect(err.contains("error   [module=\(Self.moduleID)] service error line"))
    #expect(
      !out.contains { $0.hasPrefix("warning ") || $0.hasPrefix("error   ") }, "\(r.stdout.prefix(2000))")
    #expect(!err.contains { $0.hasPrefix("info    ") }, "\(r.stderr.prefix(2000))")
    // Not under the journal: no priority prefix, the level word instead.
    #expect(!(out + err).contains { $0.hasPrefix("<") })
    // The table and the summary stay on standard output.
    #expect(out.contains { $0.hasPrefix("MODULE ") })
    #expect(out.contains { $0.hasPrefix("1 module: 1 ran and stopped cleanly") })
  }

  @Test func jsonModeKeepsEveryLogLineOnStandardError() throws {
    try installChattyModule()
    let r = try runHost(try unitCommandLine() + ["--json"], journal: false)
    #expect(r.status == 0)
    #expect(r.stderr.contains("info    [module=\(Self.moduleID)] service info line"))
    #expect(r.stderr.contains("warning [module=\(Self.moduleID)] service warning line"))
    #expect(r.stdout.hasPrefix("{"), "only the report on standard output: \(r.stdout.prefix(300))")
  }

  /// `$JOURNAL_STREAM` left over from a parent whose output went elsewhere (the variable is
  /// inherited, the stream is not): no prefix, as sd-daemon's rule of comparing the device and
  /// inode of the descriptor says.
  @Test func aJournalStreamOfAnotherDescriptorChangesNothing() throws {
    try installChattyModule()
    let r = try runHost(try unitCommandLine(), journal: false, environment: ["JOURNAL_STREAM": "8:12345"])
    #expect(r.stdout.contains("info    [module=\(Self.moduleID)] service info line"))
    #expect(!r.stdout.contains("<6>"))
  }

  /// A datagram socket bound at `path`, as the service manager's `$NOTIFY_SOCKET`; the
  /// datagrams waiting on it once the host has gone.
  static func notifySocket(at path: String) throws -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    try #require(fd >= 0)
    var a = sockaddr_un()
    a.sun_family = sa_family_t(AF_UNIX)
    let name = Array(path.utf8)
    try #require(name.count < MemoryLayout.size(ofValue: a.sun_path))
    withUnsafeMutableBytes(of: &a.sun_path) { $0.copyBytes(from: name) }
    let bound = withUnsafePointer(to: &a) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
      }
    }
    try #require(bound == 0, "bind \(path): \(String(cString: strerror(errno)))")
    return fd
  }

  static func datagrams(_ fd: Int32) -> [String] {
    var out: [String] = []
    var buffer = [UInt8](repeating: 0, count: 8192)
    while true {
      let n = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
      guard n >= 0 else { return out }
      out.append(String(decoding: buffer[0..<n], as: UTF8.self))
    }
  }

  /// Type=notify: READY=1 once the modules run, STOPPING=1 when the host stops them.
  @Test func theHostTellsTheServiceManagerWhenItIsReadyAndWhenItStops() throws {
    try installChattyModule()
    let fd = try Self.notifySocket(at: dir.url("notify.sock"))
    defer { close(fd) }
    let r = try runHost(
      try unitCommandLine(), journal: false, environment: ["NOTIFY_SOCKET": dir.url("notify.sock")])
    #expect(r.status == 0)
    let said = Self.datagrams(fd)
    try #require(said.count == 2, "\(said)")
    #expect(said[0].hasPrefix("READY=1\n"), "\(said)")
    #expect(said[0].contains("STATUS="), "\(said)")
    #expect(said[1].hasPrefix("STOPPING=1"), "\(said)")
  }

  /// The table quotes a crashed module's last lines; under the journal, text of the module there
  /// must not start a record with a priority either (a NUL ends a record for journald).
  @Test func aCrashDetailInTheTableCannotForgeAPriority() throws {
    var m = ModuleFixture(moduleID: "com.test.crash", entryPoint: "crash_entry")
    m.start = """
      static const char raw[] = "x\\0<0>emergency from a module\\n";
      fwrite(raw, 1, sizeof raw - 1, stdout);
      fflush(stdout);
      abort();
      """
    try m.install(in: dir)
    let r = try runHost(try unitCommandLine() + ["--max-restarts", "0"], journal: true)
    #expect(r.stdout.contains("last lines: x"), "\(r.stdout)")
    let records = r.stdout.split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\0" }
    for record in records {
      let rest = record.hasPrefix("<") ? String(record.dropFirst()) : String(record)
      #expect(rest.range(of: #"<[0-9]"#, options: .regularExpression) == nil, "\(record)")
      #expect(!record.hasPrefix("<0>"), "\(record)")
    }
  }
}
