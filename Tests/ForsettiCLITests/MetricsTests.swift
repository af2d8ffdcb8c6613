import ForsettiCore
import ForsettiTestSupport
import Foundation
import Glibc
import Testing

/// `--metrics` on a real `forsetti-host run` with the shared database example (a provider and
/// two consumers calling it): the page over real TCP, `promtool check metrics` on it, and a real
/// Prometheus scraping the host until its HTTP API returns the host's series.
@Suite(.onTestThreads, .serialized) struct MetricsTests {
  let dir = TemporaryDirectory("metrics")

  static let provider = "com.example.shared-database"
  static let notes = "com.example.notes"

  /// The host with `--metrics 127.0.0.1:0`, and the port it printed.
  func launch(extra: [String] = []) throws -> (DevHost, UInt16) {
    try ExampleModules.installSharedDatabase(in: dir)
    let host = try DevHost.launch(
      [
        "run", "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state",
        dir.url("state"), "--approve-all", "--metrics", "127.0.0.1:0",
      ] + extra)
    guard let line = host.await("metrics: http://127.0.0.1:", timeout: 120)?.1,
      let after = line.range(of: "http://127.0.0.1:")?.upperBound,
      let port = UInt16(line[after...].prefix { $0.isNumber })
    else {
      host.stop()
      throw Failure.noAddress(host.lines.suffix(20).joined(separator: "\n"))
    }
    return (host, port)
  }

  enum Failure: Error { case noAddress(String) }

  /// `GET path` on 127.0.0.1:`port`: status and body.
  static func get(_ port: UInt16, _ path: String, method: String = "GET") throws -> (Int, String) {
    let (status, text) = try DebugScreenTests.exchange(
      port, "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n")
    let body = text.range(of: "\r\n\r\n").map { String(text[$0.upperBound...]) } ?? ""
    return (status, body)
  }

  /// The value of the sample `series` (name and labels exactly as written) in `text`.
  static func value(_ text: String, _ series: String) -> Double? {
    for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
      return Double(line.dropFirst(series.count + 1))
    }
    return nil
  }

  /// Polls the page until `ready` holds for it (a generous deadline; the modules start and call
  /// on their own schedule).
  static func page(_ port: UInt16, until ready: (String) -> Bool) throws -> String {
    let end = Date().addingTimeInterval(60)
    var last = ""
    while Date() < end {
      let (status, body) = try get(port, "/metrics")
      try #require(status == 200, "\(body)")
      last = body
      if ready(body) { return body }
      usleep(50_000)
    }
    return last
  }

  @Test func servesRealCountsThatPromtoolAccepts() throws {
    let launched = Int64(Date().timeIntervalSince1970)
    let (host, port) = try launch()
    defer { host.stop() }
    let provider = "{module=\"\(Self.provider)\"}"
    let notes = "{module=\"\(Self.notes)\"}"
    // A module calls the host from its start, before the host has recorded its state: the page
    // is read once both are there (a loaded machine showed the calls and no state yet).
    let text = try Self.page(port) { t in
      (Self.value(t, "forsetti_module_host_calls_total\(notes)") ?? 0) > 0
        && Self.value(t, "forsetti_host_modules{state=\"started\"}") == 3
    }
    let calls = try #require(Self.value(text, "forsetti_module_host_calls_total\(notes)"), "\(text)")
    #expect(calls > 0, "\(text)")
    // Counted once each: the counter and the histogram's count are the same number.
    #expect(Self.value(text, "forsetti_module_host_call_seconds_count\(notes)") == calls, "\(text)")
    #expect(
      Self.value(text, "forsetti_module_host_call_seconds_bucket{module=\"\(Self.notes)\",le=\"+Inf\"}")
        == calls)
    // The consumers call the provider over channels of their own, never through the host: by
    // the time Notes logs its rows it has made at least six calls (resume: list, put, get; a
    // tick: put, list, get), which the provider's count shows, read from the channels' rings.
    var from = 0
    var rows: String?
    while rows == nil, let hit = host.await(" rows: ", from: from) {
      if hit.1.contains("notes: ") { rows = hit.1 }
      from = hit.0 + 1
    }
    #expect(rows != nil, "\(host.lines.suffix(20))")
    let served = try Self.page(port) { t in
      (Self.value(t, "forsetti_module_role_calls_total\(provider)") ?? 0) >= 6
    }
    #expect((Self.value(served, "forsetti_module_role_calls_total\(provider)") ?? 0) >= 6, "\(served)")
    #expect(Self.value(served, "forsetti_module_role_calls_total\(notes)") == 0, "\(served)")
    #expect(
      Self.value(text, "forsetti_module_state{module=\"\(Self.notes)\",state=\"started\"}") == 1, "\(text)")
    #expect(
      Self.value(text, "forsetti_module_state{module=\"\(Self.notes)\",state=\"failed\"}") == 0, "\(text)")
    #expect(Self.value(text, "forsetti_host_modules{state=\"started\"}") == 3, "\(text)")
    #expect((Self.value(text, "forsetti_host_judging_seconds_count") ?? 0) >= 1, "\(text)")
    #expect((Self.value(text, "forsetti_host_reconcile_seconds_count") ?? 0) >= 1, "\(text)")
    // The host's own: its version (the one `--version` and `status` say), when it started, no
    // upgrade yet and so no time of one.
    #expect(Self.value(text, "forsetti_host_info{version=\"\(ForsettiVersion.current)\"}") == 1, "\(text)")
    let started = try #require(Self.value(text, "forsetti_host_started_timestamp_seconds"), "\(text)")
    #expect(
      Double(launched - 1) <= started && started <= Date().timeIntervalSince1970 + 1,
      "started \(started), launched \(launched)")
    #expect(Self.value(text, "forsetti_host_upgrades_total") == 0, "\(text)")
    #expect(!text.contains("forsetti_host_upgraded_timestamp_seconds"), "\(text)")
    #expect(
      Self.value(text, "forsetti_module_crashes_total{module=\"\(Self.notes)\",signal=\"none\"}") == 0,
      "\(text)")
    // Issue 40: where the host has cgroups, every worker's CPU is a sample — also where cgroup v1
    // mounts cpuacct apart from cpu (as here), which gave none.
    if served.contains("forsetti_module_memory_bytes{") {
      #expect(Self.value(served, "forsetti_module_cpu_seconds_total\(provider)") != nil, "\(served)")
    }

    // promtool's lint complaints fail the test as much as its errors.
    let file = dir.url("metrics.txt")
    try text.write(toFile: file, atomically: true, encoding: .utf8)
    let check = try ProcessRunner.run(
      "/bin/sh", ["-c", "/usr/bin/promtool check metrics < \"$1\"", "sh", file])
    #expect(check.status == 0, "\(check.stdout)\(check.stderr)\n\(text)")
    #expect(check.stdout.isEmpty && check.stderr.isEmpty, "\(check.stdout)\(check.stderr)")

    // Only /metrics, only GET and HEAD.
    #expect(try Self.get(port, "/").0 == 404)
    #expect(try Self.get(port, "/metrics", method: "POST").0 == 405)
    #expect(try Self.get(port, "/metrics", method: "HEAD").0 == 200)
  }

  /// A module whose worker aborts soon after each start: counted as a crash each time, restarted
  /// once (`--max-restarts 1`), then quarantined; the healthy neighbour beside it counts none.
  @Test func countsCrashesRestartsAndQuarantine() throws {
    var m = ModuleFixture(moduleID: "com.test.crashy", entryPoint: "crashy_entry")
    m.prelude = """
      #include <pthread.h>
      #include <stdlib.h>
      #include <unistd.h>
      static void *die(void *unused) { (void)unused; usleep(100000); abort(); return NULL; }
      """
    m.start = """
      pthread_t t;
      pthread_create(&t, NULL, die, NULL);
      return FORSETTI_OK;
      """
    try m.install(in: dir)
    let (host, port) = try launch(extra: ["--max-restarts", "1"])
    defer { host.stop() }
    let crashy = "{module=\"com.test.crashy\"}"
    let text = try Self.page(port) { t in Self.value(t, "forsetti_module_quarantined\(crashy)") == 1 }
    #expect(Self.value(text, "forsetti_module_quarantined\(crashy)") == 1, "\(text)")
    // Each abort seen by the worker's crash handler: counted under its signal.
    #expect(
      Self.value(text, "forsetti_module_crashes_total{module=\"com.test.crashy\",signal=\"SIGABRT\"}") == 2,
      "\(text)")
    #expect(Self.value(text, "forsetti_module_restarts_total\(crashy)") == 1, "\(text)")
    #expect(Self.value(text, "forsetti_module_quarantines_total\(crashy)") == 1, "\(text)")
    #expect(
      Self.value(text, "forsetti_module_state{module=\"com.test.crashy\",state=\"failed\"}") == 1, "\(text)")
    // The positive control's neighbour: the same page counts nothing against a healthy module.
    #expect(
      Self.value(text, "forsetti_module_crashes_total{module=\"\(Self.notes)\",signal=\"none\"}") == 0,
      "\(text)")
  }

  /// A value that is not an address literal is refused before anything starts, naming it; the
  /// same command with a good value starts (the positive control is `launch` above).
  @Test(arguments: ["localhost:9464", "127.0.0.1:65536", "[::1]9464"])
  func aBadAddressIsAUsageError(_ value: String) throws {
    try ExampleModules.installSharedDatabase(in: dir)
    let r = try HostBinary.run([
      "run", "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state",
      dir.url("state"),
      "--approve-all", "--metrics", value,
    ])
    #expect(r.status != 0, "\(r.stdout)")
    #expect(r.stderr.contains("--metrics") && r.stderr.contains(value), "\(r.stderr)")
    #expect(!FileManager.default.fileExists(atPath: dir.url("state")), "the host started: \(r.stdout)")
  }

  @Test func aRealPrometheusScrapesTheHost() throws {
    let (host, port) = try launch()
    defer { host.stop() }
    let promPort = try Self.freePort()
    let config = dir.url("prometheus.yml")
    try """
    global:
      scrape_interval: 1s
    scrape_configs:
      - job_name: forsetti
        static_configs:
          - targets: ["127.0.0.1:\(port)"]
    """.write(toFile: config, atomically: true, encoding: .utf8)
    let prometheus = Process()
    prometheus.executableURL = URL(fileURLWithPath: "/usr/bin/prometheus")
    prometheus.arguments = [
      "--config.file=\(config)", "--storage.tsdb.path=\(dir.url("tsdb"))",
      "--web.listen-address=127.0.0.1:\(promPort)",
    ]
    let log = FileHandle(forWritingAtPath: "/dev/null")
    prometheus.standardOutput = log
    prometheus.standardError = log
    try prometheus.run()
    defer {
      kill(prometheus.processIdentifier, SIGTERM)
      prometheus.waitUntilExit()
    }
    let query = "/api/v1/query?query=forsetti_module_host_calls_total"
    let end = Date().addingTimeInterval(90)
    var last = ""
    while Date() < end {
      // Connected first without a recorded failure: Prometheus takes a moment to listen.
      if Self.listening(promPort), let (status, body) = try? Self.get(promPort, query), status == 200 {
        last = body
        if body.contains("\"module\":\"\(Self.notes)\"") { break }
      }
      usleep(200_000)
    }
    #expect(last.contains("\"module\":\"\(Self.notes)\""), "Prometheus answered: \(last)")
    #expect(last.contains("\"job\":\"forsetti\""), "\(last)")
  }

  /// Whether something accepts connections on 127.0.0.1:`port`.
  static func listening(_ port: UInt16) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var a = sockaddr_in()
    a.sin_family = sa_family_t(AF_INET)
    a.sin_port = port.bigEndian
    a.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    return withUnsafePointer(to: &a) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
      }
    }
  }

  /// A port free now on 127.0.0.1 (the kernel's pick).
  static func freePort() throws -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    try #require(fd >= 0)
    defer { close(fd) }
    var a = sockaddr_in()
    a.sin_family = sa_family_t(AF_INET)
    a.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &a) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
      }
    }
    try #require(ok)
    return UInt16(bigEndian: a.sin_port)
  }

  // MARK: issue 40, fourth finding

  /// Any `Host` header was answered 200, so a page in a browser that rebinds its own name to
  /// 127.0.0.1 could read every module's counters. On a loopback address only the address
  /// itself or `localhost` (with this port or none) is served; another name gets 421 and no
  /// series. Controls: the address and `localhost` are served the page.
  @Test func aRequestNamingAnotherHostIsRefused() throws {
    let (host, port) = try launch()
    defer { host.stop() }
    func ask(_ name: String) throws -> (Int, String) {
      let (status, text) = try DebugScreenTests.exchange(
        port, "GET /metrics HTTP/1.1\r\nHost: \(name)\r\nConnection: close\r\n\r\n")
      return (status, text)
    }
    for name in ["evil.example", "evil.example:\(port)", "127.0.0.2:\(port)", "localhost.evil.example"] {
      let (status, text) = try ask(name)
      #expect(status == 421, "\(name): \(status)")
      #expect(!text.contains("forsetti_"), "\(name): series served")
    }
    for name in ["127.0.0.1:\(port)", "localhost:\(port)", "LOCALHOST", "127.0.0.1"] {
      let (status, text) = try ask(name)
      #expect(status == 200 && text.contains("forsetti_"), "\(name): \(status)")
    }
  }

  /// A taken port was reported only after every module had started and stopped again. Now the
  /// port is bound before any module starts: exit 2 naming the address, and the provider's
  /// worker never ran (its pid file is not written, no `started` line). Control: the same host
  /// on a free port starts it.
  @Test func aTakenPortIsAnErrorBeforeAnyModuleStarts() throws {
    let taken = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(taken) }
    var a = sockaddr_in()
    a.sin_family = sa_family_t(AF_INET)
    a.sin_addr.s_addr = inet_addr("127.0.0.1")
    a.sin_port = 0
    let bound = withUnsafePointer(to: &a) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(taken, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    try #require(bound == 0 && listen(taken, 1) == 0)
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &a) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(taken, $0, &len) }
    }
    let port = UInt16(bigEndian: a.sin_port)
    try ExampleModules.installSharedDatabase(in: dir)
    let r = try HostBinary.run([
      "run", "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state",
      dir.url("state"),
      "--approve-all", "--metrics", "127.0.0.1:\(port)", "--for", "30",
    ])
    #expect(r.status == 2, "\(r.stdout)\n\(r.stderr)")
    #expect(r.stderr.contains("127.0.0.1:\(port)"), "\(r.stderr)")
    #expect(!r.stdout.contains("] started "), "a module started first: \(r.stdout)")
    let (control, _) = try launch()
    #expect(control.await("started \(Self.provider)", timeout: 120) != nil, "\(control.lines.suffix(10))")
    control.stop()
  }

  /// `0.0.0.0` was accepted without a word. A non-loopback address is served, with a warning
  /// that says who can read it; the loopback default has none (the control).
  @Test func aNonLoopbackAddressIsServedWithAWarning() throws {
    try ExampleModules.installSharedDatabase(in: dir)
    let host = try DevHost.launch([
      "run", "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state",
      dir.url("state"),
      "--approve-all", "--metrics", "0.0.0.0:0",
    ])
    #expect(host.await("is not a loopback address", timeout: 120) != nil, "\(host.lines.suffix(10))")
    host.stop()
    let (loopback, _) = try launch()
    defer { loopback.stop() }
    #expect(loopback.await("started \(Self.provider)", timeout: 120) != nil)
    #expect(!loopback.lines.contains { $0.contains("is not a loopback address") }, "\(loopback.lines)")
  }
}
