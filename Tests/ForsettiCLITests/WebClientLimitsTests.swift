import ForsettiTestSupport
import Foundation
import Glibc
import Testing

/// Issue 40, fourth and fifth findings: anyone local could take `/metrics` (and the page) away
/// — 64 connections sending a header line every 5 s, or 1,000 idle ones, made every scrape time
/// out. The servers now tell clients apart by the uid owning the other end of a loopback
/// connection (sock_diag) and let one hold a share of the connections at most; and a request's
/// headers must arrive within 5 s however slowly they trickle.
@Suite(.onTestThreads, .serialized) struct WebClientLimitsTests {
  let dir = TemporaryDirectory("web-clients")

  /// Another user's connections: opens `count` to 127.0.0.1:`port` as uid 65534, each sending
  /// the first line of a request, then waits until the server has closed all but `expectHeld`
  /// (or 20 s passed) and prints `held=N` — and holds the rest open until its input closes.
  static let holder = """
    import select, socket, sys, time
    port, count, expect = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    socks = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET /metrics HTTP/1.1\\r\\n")
        socks.append(s)
    closed = set()
    end = time.monotonic() + 20
    while time.monotonic() < end and count - len(closed) > expect:
        ready, _, _ = select.select([s for s in socks if s not in closed], [], [], 0.2)
        for s in ready:
            try:
                if s.recv(4096) == b"":
                    closed.add(s)
            except OSError:
                closed.add(s)
    print(f"held={count - len(closed)}", flush=True)
    sys.stdin.read()
    """

  /// Runs `holder` as uid 65534 against `port` with `count` connections: the number it says the
  /// server held, and the process (to end by closing its input).
  static func holdConnections(_ port: UInt16, count: Int, expectHeld: Int) throws -> (Int?, Process, Pipe) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
    p.arguments = [
      "--reuid=\(HostileHost.nobody)", "--regid=\(HostileHost.nobody)", "--clear-groups", "--",
      "/usr/bin/python3",
      "-c", holder, String(port), String(count), String(expectHeld),
    ]
    let out = Pipe()
    let input = Pipe()
    p.standardOutput = out
    p.standardInput = input
    try p.run()
    var line = ""
    while !line.contains("\n") {
      let d = out.fileHandleForReading.availableData
      if d.isEmpty { break }
      line += String(decoding: d, as: UTF8.self)
    }
    let held = line.split(separator: "=").last.flatMap {
      Int($0.trimmingCharacters(in: .whitespacesAndNewlines))
    }
    return (held, p, input)
  }

  /// The host with `--metrics 127.0.0.1:0` and the port it printed.
  func metricsHost() throws -> (DevHost, UInt16) {
    try ExampleModules.installSharedDatabase(in: dir)
    let host = try DevHost.launch([
      "run", "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state",
      dir.url("state"),
      "--approve-all", "--metrics", "127.0.0.1:0",
    ])
    guard let line = host.await("metrics: http://127.0.0.1:", timeout: 120)?.1,
      let after = line.range(of: "http://127.0.0.1:")?.upperBound,
      let port = UInt16(line[after...].prefix { $0.isNumber })
    else {
      host.stop()
      throw MetricsTests.Failure.noAddress(host.lines.suffix(20).joined(separator: "\n"))
    }
    return (host, port)
  }

  /// 100 half-sent requests of another user: the server keeps 8 of them (its share per
  /// client) and closes the rest at once, and root's scrape is served meanwhile. Before, the
  /// server kept 64 (all it takes) and the scrape was closed unanswered.
  @Test func oneUserHoldingConnectionsLeavesTheScrapeToOthers() throws {
    try #require(geteuid() == 0, "running as another user needs root")
    let (host, port) = try metricsHost()
    defer { host.stop() }
    let (held, holder, input) = try Self.holdConnections(port, count: 100, expectHeld: 8)
    defer {
      try? input.fileHandleForWriting.close()
      holder.waitUntilExit()
    }
    #expect(held == 8, "the server held \(String(describing: held)) of one user's 100 connections")
    let (status, body) = try MetricsTests.get(port, "/metrics")
    #expect(status == 200 && body.contains("forsetti_"), "root's scrape: \(status)")
  }

  /// A request whose header lines trickle in one a second kept its connection forever (each
  /// byte reset the idle timeout). It is closed once its headers took 5 s; the control, a
  /// whole request, is answered on the same server.
  @Test func aRequestTricklingItsHeadersIsClosed() throws {
    let (host, port) = try metricsHost()
    defer { host.stop() }
    let fd = try DebugScreenTests.open(port, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n")
    defer { close(fd) }
    var wait = timeval(tv_sec: 1, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
    var closedAfter: Int?
    // Up to a minute of trickling: far past the deadline, far under a hold that never ends.
    for n in 1...60 where closedAfter == nil {
      let line = Array("X-Slow-\(n): x\r\n".utf8)
      _ = line.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
      var byte: UInt8 = 0
      let r = recv(fd, &byte, 1, 0)
      if r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) { closedAfter = n }
    }
    #expect(closedAfter != nil, "a request trickling its headers for a minute was never closed")
    let (status, _) = try MetricsTests.get(port, "/metrics")
    #expect(status == 200)
  }
}
