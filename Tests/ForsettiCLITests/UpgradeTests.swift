import ForsettiCore
import ForsettiTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

/// `forsetti-host upgrade` (issue 43, its first part): a host run from a copy of the executable,
/// the copy replaced as a package upgrade replaces it, becomes the new file in the same process
/// — the same pid, `/proc/PID/exe` no longer the deleted file — while `status` keeps being
/// answered; a new file that cannot take the host over is refused and the host goes on as it
/// was; what a new image would not keep (an in-memory override, a module in the host's own
/// process) refuses it. As root and as uid 65534.
@Suite(.onTestThreads, .serialized) struct UpgradeTests {
  /// What `/proc/PID/exe` says.
  static func exe(_ pid: Int32) -> String {
    (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")) ?? ""
  }

  /// The signals a live process blocks (`SigBlk` of its status); nil for a zombie or none.
  static func blockedSignals(_ pid: Int32) -> UInt64? {
    let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
    guard !status.contains("State:\tZ"),
      let line = status.split(separator: "\n").first(where: { $0.hasPrefix("SigBlk:") })
    else { return nil }
    return UInt64(line.dropFirst("SigBlk:".count).trimmingCharacters(in: .whitespaces), radix: 16)
  }

  /// The built host and its worker, copied into `dir/bin`, where the test may replace them.
  static func installCopy(in h: HostileHost) throws -> String {
    let bin = h.dir.url("bin")
    for d in [bin, h.dir.url("manifests"), h.dir.url("plugins")] {
      try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
    }
    chmod(bin, 0o755)
    let built = (HostBinary.path as NSString).deletingLastPathComponent
    for name in ["forsetti-host", "forsetti-worker"] {
      try #require(HostBinary.copyExecutable(built + "/" + name, to: bin + "/" + name), "copy \(name)")
    }
    return bin + "/forsetti-host"
  }

  /// The host's live workers: after an upgrade the new image's zygote is started ahead of need,
  /// and the process spawned for it is reaped only when it first forks (a zombie until then).
  static func liveWorkers(of pid: Int32) -> [Int32] {
    RunCommandTests.workers(of: pid).sorted().filter { w in
      let stat = (try? String(contentsOfFile: "/proc/\(w)/stat", encoding: .utf8)) ?? ""
      return !(stat.split(separator: ")").last?.hasPrefix(" Z") ?? true)
    }
  }

  /// Waits until the host answers `status` (its socket exists before it serves it), a minute
  /// at most: a safety net, the verdicts come after.
  static func awaitAnswer(_ h: HostileHost, state: String) {
    let end = Date().addingTimeInterval(60)
    while (try? h.cli(["status", "--state", state]))?.status != 0 && Date() < end { usleep(20_000) }
  }

  /// Replaces `path` as a package manager does: a new file renamed over it.
  static func replace(_ path: String, with source: String) throws {
    try #require(HostBinary.copyExecutable(source, to: path + ".new"))
    try #require(rename(path + ".new", path) == 0, "rename: \(String(cString: strerror(errno)))")
  }

  /// Asks `status` in a loop on a thread of its own until stopped, counting the answers that
  /// were not a running host's (a refused connection during the exec would be one).
  final class StatusAsker: Sendable {
    let answered = Atomic<Int>(0)
    let unanswered = Mutex<[String]>([])
    let stopped = Atomic<Bool>(false)
    let done = DispatchSemaphore(value: 0)

    func start(_ h: HostileHost, state: String) {
      Thread.detachNewThread { [self] in
        while !stopped.load(ordering: .acquiring) {
          let r = try? h.cli(["status", "--state", state])
          if r?.status == 0 {
            answered.add(1, ordering: .relaxed)
          } else {
            unanswered.withLock { $0.append("\(r?.status ?? -1): \(r?.stderr ?? "")") }
          }
        }
        done.signal()
      }
    }

    func stop() {
      stopped.store(true, ordering: .releasing)
      done.wait()
    }
  }

  /// Scrapes `/metrics` in a loop on a thread of its own until stopped, keeping what was not a
  /// 200 (a refused connection while the socket changed hands would be one).
  final class MetricsScraper: Sendable {
    let answered = Atomic<Int>(0)
    let failed = Mutex<[String]>([])
    let stopped = Atomic<Bool>(false)
    let done = DispatchSemaphore(value: 0)

    func start(port: UInt16) {
      Thread.detachNewThread { [self] in
        while !stopped.load(ordering: .acquiring) {
          do {
            let (status, body) = try MetricsTests.get(port, "/metrics")
            if status == 200 && body.contains("forsetti_host_info") {
              answered.add(1, ordering: .relaxed)
            } else {
              failed.withLock { $0.append("HTTP \(status)") }
            }
          } catch {
            failed.withLock { $0.append("\(error)") }
          }
        }
        done.signal()
      }
    }

    func stop() {
      stopped.store(true, ordering: .releasing)
      done.wait()
    }
  }

  @Test(arguments: HostileHost.Identity.allCases)
  func theHostBecomesTheNewExecutableInTheSameProcess(as identity: HostileHost.Identity) throws {
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    let exe = try Self.installCopy(in: h)
    let state = h.dir.url("state")
    let conf = h.dir.url("host.conf")
    try "log-rate = 1000\n".write(toFile: conf, atomically: false, encoding: .utf8)
    // /metrics on a fixed port: the new image serves it again on the same address.
    let metricsPort = try MetricsTests.freePort()
    let seen = Mutex<[String: String]>([:])
    let run = try h.run(
      for: 120, extraArguments: ["--config", conf, "--metrics", "127.0.0.1:\(metricsPort)"], executable: exe,
      ready: { FileManager.default.fileExists(atPath: state + "/control.sock") },
      observe: { pid in
        var facts: [String: String] = ["pid": String(pid), "exe before": Self.exe(pid)]
        defer {
          seen.withLock { $0 = facts }
          kill(pid, SIGTERM)
        }
        // Answering first: the socket is there before the host serves it.
        Self.awaitAnswer(h, state: state)
        do {
          try Self.replace(exe, with: HostBinary.path)
          facts["exe replaced"] = Self.exe(pid)
          let asker = StatusAsker()
          asker.start(h, state: state)
          let scraper = MetricsScraper()
          scraper.start(port: metricsPort)
          facts["asked at"] = String(Int64(Date().timeIntervalSince1970))
          let upgrade = try h.cli(["upgrade", "--state", state])
          // A few more answers after it, from the new image.
          let after = asker.answered.load(ordering: .relaxed) + 3
          let scraped = scraper.answered.load(ordering: .relaxed) + 3
          let end = Date().addingTimeInterval(60)
          while asker.answered.load(ordering: .relaxed) < after && Date() < end { usleep(10_000) }
          while scraper.answered.load(ordering: .relaxed) < scraped && Date() < end { usleep(10_000) }
          asker.stop()
          scraper.stop()
          facts["scraped"] = String(scraper.answered.load(ordering: .relaxed))
          facts["scrapes failed"] = scraper.failed.withLock { $0.joined(separator: " | ") }
          facts["upgrade status"] = String(upgrade.status)
          facts["upgrade out"] = upgrade.stdout + upgrade.stderr
          facts["exe after"] = Self.exe(pid)
          facts["answered"] = String(asker.answered.load(ordering: .relaxed))
          facts["unanswered"] = asker.unanswered.withLock { $0.joined(separator: " | ") }
          let status = try h.cli(["status", "--json", "--state", state])
          facts["status"] = status.stdout
          // The new image serves /metrics (from the time it started, before it answered).
          facts["metrics"] = try MetricsTests.page(metricsPort) {
            $0.contains("forsetti_host_upgrades_total")
          }

          // A new file that is no host: refused by its preflight, and the host goes on.
          let script = h.dir.url("broken.sh")
          try "#!/bin/sh\necho this is not a host >&2\nexit 1\n".write(
            toFile: script, atomically: false, encoding: .utf8)
          chmod(script, 0o755)
          try Self.replace(exe, with: script)
          let refused = try h.cli(["upgrade", "--state", state])
          facts["refused status"] = String(refused.status)
          facts["refused out"] = refused.stdout + refused.stderr
          let still = try h.cli(["status", "--json", "--state", state])
          facts["still"] = still.stdout
          facts["still status"] = String(still.status)

          // A new file that is a host, but refuses this host's options (host.conf edited since
          // it started): refused before the handover, not after it.
          try Self.replace(exe, with: HostBinary.path)
          try "log-rate = 0\n".write(toFile: conf, atomically: false, encoding: .utf8)
          let unsettled = try h.cli(["upgrade", "--state", state])
          facts["settings status"] = String(unsettled.status)
          facts["settings out"] = unsettled.stdout + unsettled.stderr
          try "log-rate = 1000\n".write(toFile: conf, atomically: false, encoding: .utf8)

          // A module installed now starts in a worker of the new image, which blocked the stop
          // signals across its exec: the worker must not inherit that.
          try ModuleFixture(moduleID: "com.test.late", entryPoint: "late_entry").install(in: h.dir)
          let lateEnd = Date().addingTimeInterval(60)
          var workers: [Int32] = []
          while workers.isEmpty && Date() < lateEnd {
            let runtime = (try? String(contentsOfFile: state + "/runtime.json", encoding: .utf8)) ?? ""
            if runtime.contains("com.test.late") && runtime.contains("started") {
              workers = RunCommandTests.workers(of: pid).filter { Self.blockedSignals($0) != nil }
            }
            usleep(20_000)
          }
          facts["late worker blocks"] = workers.map { String(Self.blockedSignals($0) ?? 0, radix: 16) }
            .joined(separator: ",")
        } catch {
          facts["error"] = "\(error)"
        }
        return [:]
      })
    let f = seen.withLock { $0 }
    let pid = try #require(f["pid"])
    #expect(f["error"] == nil, "\(f)")
    #expect(f["exe before"] == exe, "\(f)")
    #expect(f["exe replaced"] == exe + " (deleted)", "the test replaced the file: \(f)")
    #expect(f["upgrade status"] == "0", "\(f["upgrade out"] ?? "")\n\(run.output.suffix(2000))")
    #expect(f["upgrade out"]?.contains("upgraded: pid \(pid) now runs \(exe)") == true, "\(f)")
    #expect(f["exe after"] == exe, "the host runs the new file: \(f)")
    #expect(f["status"]?.contains("\"pid\":\(pid)") == true, "\(f)")
    #expect(f["status"]?.contains("\"upgrades\":1") == true, "\(f)")
    // status and /metrics say the same image: version, one upgrade, and when it was.
    let image = try #require(
      (try? JSONSerialization.jsonObject(with: Data((f["status"] ?? "").utf8)) as? [String: Any])?["image"]
        as? [String: Any], "\(f)")
    let upgradedAt = try #require(image["upgradedAt"] as? Int, "\(image)")
    let asked = try #require(Int(f["asked at"] ?? ""), "\(f)")
    #expect(
      asked - 1 <= upgradedAt && upgradedAt <= asked + 120, "asked at \(asked), upgraded at \(upgradedAt)")
    #expect((image["startedAt"] as? Int ?? .max) <= upgradedAt, "\(image)")
    let metrics = f["metrics"] ?? ""
    #expect(MetricsTests.value(metrics, "forsetti_host_upgrades_total") == 1, "\(metrics)")
    #expect(
      MetricsTests.value(metrics, "forsetti_host_upgraded_timestamp_seconds") == Double(upgradedAt),
      "\(metrics)")
    #expect(
      MetricsTests.value(metrics, "forsetti_host_started_timestamp_seconds")
        == (image["startedAt"] as? Int).map(Double.init),
      "\(metrics)")
    #expect(
      MetricsTests.value(metrics, "forsetti_host_info{version=\"\(ForsettiVersion.current)\"}") == 1,
      "\(metrics)")
    // Asked all the while, `status` was always answered by a running host.
    #expect((Int(f["answered"] ?? "") ?? 0) >= 3, "\(f)")
    #expect(f["unanswered"] == "", "\(f)")
    // /metrics too: its listening socket was handed over, so no scrape was refused.
    #expect((Int(f["scraped"] ?? "") ?? 0) >= 3 && f["scrapes failed"] == "", "\(f)")
    #expect(f["refused status"] == "1", "\(f)")
    #expect(
      f["refused out"]?.contains("refused to take this host over (exit status 1): this is not a host")
        == true,
      "\(f)")
    #expect(f["still status"] == "0" && f["still"]?.contains("\"pid\":\(pid)") == true, "\(f)")
    #expect(f["settings status"] == "1", "\(f)")
    #expect(
      f["settings out"]?.contains(
        "(exit status 2): forsetti-host: error: \(conf):1: invalid value '0' for 'log-rate'")
        == true, "\(f)")
    #expect(
      run.output.contains("upgrade: this host (pid \(pid)) now runs \(exe)"), "\(run.output.suffix(2000))")
    // SIGHUP, SIGINT and SIGTERM are bits 0, 1 and 14: none blocked in the new image's worker.
    let blocks = (f["late worker blocks"] ?? "").split(separator: ",").compactMap { UInt64($0, radix: 16) }
    #expect(!blocks.isEmpty, "the late module's worker was found: \(f)")
    #expect(blocks.allSatisfy { $0 & 0x4003 == 0 }, "\(f)")
    // Stopped by the SIGTERM after all of it: the new image's handlers had it.
    #expect(run.status == 0 && !run.killedByWatchdog, "\(run.status)\n\(run.output.suffix(2000))")
  }

  /// A new file that passes the preflight and then cannot run as the host (here a script that
  /// says ready and exits once it is exec'd): the host is gone, and `upgrade` says so, exit 4,
  /// instead of waiting or claiming success.
  @Test func aNewImageThatDoesNotComeUpIsReported() throws {
    let h = HostileHost(.current)
    let exe = try Self.installCopy(in: h)
    let state = h.dir.url("state")
    let seen = Mutex<[String: String]>([:])
    let run = try h.run(
      for: 120, executable: exe,
      ready: { FileManager.default.fileExists(atPath: state + "/control.sock") },
      observe: { pid in
        var facts: [String: String] = [:]
        defer { seen.withLock { $0 = facts } }
        Self.awaitAnswer(h, state: state)
        let script = h.dir.url("liar.sh")
        try? """
        #!/bin/sh
        [ "$1" = upgrade-preflight ] && { echo ready 9.9.9; exit 0; }
        case "$*" in *--print-config*) exit 0;; esac
        echo "the new image gives up" >&2
        exit 3
        """.write(toFile: script, atomically: false, encoding: .utf8)
        chmod(script, 0o755)
        do { try Self.replace(exe, with: script) } catch { facts["error"] = "\(error)" }
        let r = try? h.cli(["upgrade", "--state", state])
        facts["status"] = String(r?.status ?? -1)
        facts["said"] = (r?.stdout ?? "") + (r?.stderr ?? "")
        return [:]
      })
    let f = seen.withLock { $0 }
    #expect(f["status"] == "4", "\(f)")
    #expect(f["said"]?.contains("the new image did not come up") == true, "\(f)")
    #expect(
      run.status == 3 && run.output.contains("the new image gives up"),
      "\(run.status) \(run.output.suffix(500))")
  }

  /// An in-memory override (set through the control socket, gone when the host stops) is handed
  /// over: the module it keeps off stays off in the new image, and the running one keeps its
  /// worker; cleared after the upgrade, the module starts (positive control: the override, not
  /// something else, kept it off). With `--in-process`, a running module lives in the host's own
  /// memory: the upgrade is refused, saying so.
  @Test func inMemoryOverridesAreKeptAndInProcessModulesRefuseTheUpgrade() throws {
    let h = HostileHost(.current)
    let exe = try Self.installCopy(in: h)
    try h.install(ModuleFixture(moduleID: "com.test.ticker", entryPoint: "ticker_entry"))
    try h.install(ModuleFixture(moduleID: "com.test.kept.off", entryPoint: "kept_off_entry"))
    let state = h.dir.url("state")
    let seen = Mutex<[String: String]>([:])
    _ = try h.run(
      for: 120, executable: exe,
      ready: {
        (try? String(contentsOfFile: state + "/runtime.json", encoding: .utf8))?.contains("started") == true
      },
      observe: { pid in
        var facts: [String: String] = [:]
        defer {
          seen.withLock { $0 = facts }
          kill(pid, SIGTERM)
        }
        Self.awaitAnswer(h, state: state)
        let off = try? h.cli([
          "override", "module", "com.test.kept.off", "off", "--in-memory", "--state", state,
        ])
        facts["off"] = String(off?.status ?? -1)
        let end = Date().addingTimeInterval(60)
        while Self.liveWorkers(of: pid).count != 1 && Date() < end { usleep(20_000) }
        let workers = Self.liveWorkers(of: pid)
        let r = try? h.cli(["upgrade", "--state", state])
        facts["status"] = String(r?.status ?? -1)
        facts["said"] = (r?.stdout ?? "") + (r?.stderr ?? "")
        facts["same workers"] = String(Self.liveWorkers(of: pid) == workers && workers.count == 1)
        let listed = try? h.cli(["override", "list", "--json", "--state", state])
        facts["listed"] = listed?.stdout ?? ""
        _ = try? h.cli(["override", "module", "com.test.kept.off", "clear", "--in-memory", "--state", state])
        while Self.liveWorkers(of: pid).count != 2 && Date() < end { usleep(20_000) }
        facts["after clear"] = String(Self.liveWorkers(of: pid).count)
        return [:]
      })
    let f = seen.withLock { $0 }
    #expect(f["off"] == "0", "\(f)")
    #expect(f["status"] == "0", "\(f)")
    #expect(f["same workers"] == "true", "\(f)")
    #expect(f["listed"]?.contains("com.test.kept.off") == true, "\(f)")
    #expect(f["after clear"] == "2", "\(f)")

    let p = HostileHost(.current)
    let pexe = try Self.installCopy(in: p)
    try p.install(ModuleFixture(moduleID: "com.test.inproc", entryPoint: "inproc_entry"))
    let pstate = p.dir.url("state")
    let said = Mutex("")
    _ = try p.run(
      for: 120, extraArguments: ["--in-process"], executable: pexe,
      ready: {
        (try? String(contentsOfFile: pstate + "/runtime.json", encoding: .utf8))?.contains("started") == true
      },
      observe: { pid in
        defer { kill(pid, SIGTERM) }
        Self.awaitAnswer(p, state: pstate)
        let r = try? p.cli(["upgrade", "--state", pstate])
        said.withLock { $0 = "\(r?.status ?? -1): \((r?.stdout ?? "") + (r?.stderr ?? ""))" }
        return [:]
      })
    #expect(
      said.withLock { $0 }.hasPrefix("1: ")
        && said.withLock { $0 }.contains(
          "modules run in the host's process (com.test.inproc), which a new image does not keep"),
      "\(said.withLock { $0 })")
  }
}
