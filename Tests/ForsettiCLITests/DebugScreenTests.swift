import ForsettiCore
import ForsettiTestSupport
import Foundation
import Glibc
import Testing

/// The debug screen's walls, over real TCP to a real `forsetti-host run --ui`: the token (a
/// header, never a cookie), the Host header, the CSRF header, the security headers; and the page
/// the host carries is the one in Sources/ForsettiCLI/Web/Assets.
@Suite(.onTestThreads, .serialized) struct DebugScreenTests {
  let dir = TemporaryDirectory("ui")

  /// One HTTP/1.1 exchange over TCP to 127.0.0.1:`port`: the status and the raw head and body.
  static func exchange(_ port: UInt16, _ request: String, readTimeout: Int = 10) throws -> (
    status: Int, text: String
  ) {
    let fd = try open(port, request)
    defer { close(fd) }
    let text = String(decoding: ControlLimitsTests.readAll(fd, timeout: readTimeout), as: UTF8.self)
    let status = Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0
    return (status, text)
  }

  /// A real `forsetti-host run --ui` on `dir` (`--approve-all`, `--for seconds`) and the page's
  /// port, token and Host header, from the address it printed.
  static func launch(in dir: TemporaryDirectory, for seconds: Int, extra: [String] = []) throws -> (
    host: DevHost, port: UInt16, token: String, me: String
  ) {
    let host = try DevHost.launch(
      [
        "run", "--ui", "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state",
        dir.url("state"), "--approve-all", "--for", String(seconds),
      ] + extra)
    guard let line = host.await("ui: http://127.0.0.1:", timeout: 120)?.1,
      let start = line.range(of: "http://")?.lowerBound
    else {
      host.stop()
      throw UIError.noAddress(host.lines.suffix(20).joined(separator: "\n"))
    }
    let url = String(line[start...])
    let parts = url.split(separator: ":")
    guard parts.count >= 3, let port = UInt16(parts[2].split(separator: "/")[0]),
      let token = url.split(separator: "=").last.map(String.init)
    else {
      host.stop()
      throw UIError.noAddress(line)
    }
    return (host, port, token, "127.0.0.1:\(port)")
  }

  enum UIError: Error { case noAddress(String) }

  static func request(
    _ method: String, _ path: String, host: String, token: String? = nil, csrf: Bool = false,
    body: String = ""
  ) -> String {
    var r = "\(method) \(path) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n"
    if let token { r += "X-Forsetti-Token: \(token)\r\n" }
    if csrf { r += "X-Forsetti-Request: 1\r\n" }
    if !body.isEmpty { r += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n" }
    return r + "\r\n" + body
  }

  @Test func everyRequestNeedsTheTokenTheLoopbackHostAndAPostTheCSRFHeader() throws {
    var f = ModuleFixture(moduleID: "com.test.one", entryPoint: "one_entry")
    f.start = "fixture_log(\"one up\"); return FORSETTI_OK;"
    try f.install(in: dir)
    let (host, port, token, me) = try Self.launch(in: dir, for: 300)
    defer { host.stop() }

    // The page holds nothing of the host: it loads without the token, and sets no cookie (a
    // browser would send a cookie to every port of 127.0.0.1).
    let first = try Self.exchange(port, Self.request("GET", "/?token=\(token)", host: me))
    #expect(first.status == 200)
    #expect(!first.text.lowercased().contains("set-cookie"), "\(first.text.prefix(800))")
    #expect(first.text.contains("Content-Security-Policy: default-src 'none'; script-src 'self'"))
    #expect(first.text.contains("X-Content-Type-Options: nosniff"))
    #expect(!first.text.lowercased().contains("access-control-allow"))
    #expect(try Self.exchange(port, Self.request("GET", "/", host: me)).status == 200)

    // What is the host's needs the token, in its header; a cookie of that name is nothing.
    let status = #"{"verb":"status"}"#
    let cookie =
      "POST /api HTTP/1.1\r\nHost: \(me)\r\nConnection: close\r\nCookie: forsetti_token=\(token)\r\n"
      + "X-Forsetti-Request: 1\r\nContent-Length: \(status.utf8.count)\r\n\r\n\(status)"
    #expect(try Self.exchange(port, cookie).status == 401)
    #expect(
      try Self.exchange(port, Self.request("POST", "/api", host: me, csrf: true, body: status)).status == 401)
    #expect(try Self.exchange(port, Self.request("GET", "/api/events", host: me)).status == 401)
    // One character changed, whatever the token starts with.
    let forged = (token.first == "0" ? "1" : "0") + token.dropFirst()
    let wrong = try Self.exchange(
      port, Self.request("POST", "/api", host: me, token: forged, csrf: true, body: status))
    #expect(wrong.status == 401)
    #expect(wrong.text.contains("open the address the host printed"))
    #expect(
      try Self.exchange(port, Self.request("GET", "/", host: "localhost:\(port)", token: token)).status
        == 200)
    // DNS rebinding: a name that resolves here is still not this page's name.
    #expect(
      try Self.exchange(port, Self.request("GET", "/", host: "evil.example:\(port)", token: token)).status
        == 421)
    #expect(
      try Self.exchange(port, Self.request("GET", "/", host: "127.0.0.1:1", token: token)).status == 421)
    #expect(
      try Self.exchange(
        port,
        Self.request("POST", "/api", host: "evil.example:\(port)", token: token, csrf: true, body: status)
      ).status == 421)

    #expect(
      try Self.exchange(port, Self.request("POST", "/api", host: me, token: token, body: status)).status
        == 403)
    let answered = try Self.exchange(
      port, Self.request("POST", "/api", host: me, token: token, csrf: true, body: status))
    #expect(answered.status == 200)
    #expect(answered.text.contains(#""ok":true"#), "\(answered.text)")
    #expect(answered.text.contains(#""running":true"#), "\(answered.text)")
    let bad = #"{"verb":"rm"}"#
    #expect(
      try Self.exchange(port, Self.request("POST", "/api", host: me, token: token, csrf: true, body: bad))
        .status == 400)
    #expect(
      try Self.exchange(port, Self.request("DELETE", "/api", host: me, token: token, csrf: true)).status
        == 405)
    // Oversized: a body past 1 MiB is refused, not gathered.
    let huge = #"{"verb":"explain","module":""# + String(repeating: "x", count: 2 << 20) + #""}"#
    let refused = try Self.exchange(
      port, Self.request("POST", "/api", host: me, token: token, csrf: true, body: huge))
    #expect(refused.status == 413)
    // Truncated: a request that promises more than it sends, then goes away, costs nothing.
    let cut =
      "POST /api HTTP/1.1\r\nHost: \(me)\r\nX-Forsetti-Token: \(token)\r\n"
      + "X-Forsetti-Request: 1\r\nContent-Length: 1000\r\n\r\n{\"verb\""
    _ = try? Self.exchange(port, cut, readTimeout: 1)
    let after = try Self.exchange(
      port, Self.request("POST", "/api", host: me, token: token, csrf: true, body: status))
    #expect(after.status == 200)

    // The page's files, byte for byte as they are in Sources/ForsettiCLI/Web/Assets.
    let js = try Self.exchange(port, Self.request("GET", "/app.js", host: me, token: token))
    #expect(js.status == 200)
    #expect(js.text.contains("Content-Type: text/javascript"))
    let assets = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent().appendingPathComponent("Sources/ForsettiCLI/Web/Assets")
    for (path, file) in [("/", "index.html"), ("/app.js", "app.js"), ("/app.css", "app.css")] {
      let served = try Self.exchange(port, Self.request("GET", path, host: me, token: token)).text
      let body = served.range(of: "\r\n\r\n").map { String(served[$0.upperBound...]) } ?? ""
      let source = try String(contentsOf: assets.appendingPathComponent(file), encoding: .utf8)
      #expect(body == source, "\(path) is not \(file) as it is in the sources")
    }
  }

  /// Connects to 127.0.0.1:`port` and sends `request`, leaving the answer unread.
  static func open(_ port: UInt16, _ request: String) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    try #require(fd >= 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    let connected = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    try #require(connected == 0)
    let bytes = Array(request.utf8)
    _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
    return fd
  }

  /// Whether an answer has arrived on `fd` (without waiting for one).
  static func answered(_ fd: Int32) -> Bool {
    var byte: UInt8 = 0
    return recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) > 0
  }

  /// The page while the host's thread is held: eight `/api` requests wait for it, and the page,
  /// its script and a new event stream are still served; the eight are answered once it is free.
  /// The host's thread is held by a module's start during `reload` (in-process), until the test
  /// releases it, so the verdict is an order of events, not a time.
  @Test(.timeLimit(.minutes(5)))
  func thePageIsServedWhileTheHostsThreadIsBusy() throws {
    let hold = dir.url("hold")
    let holding = dir.url("holding")
    var f = ModuleFixture(moduleID: "com.test.slow", entryPoint: "slow_entry")
    f.start = """
      if (access("\(hold)", F_OK) == 0) {
        close(open("\(holding)", O_CREAT | O_WRONLY, 0600));
        for (int i = 0; i < 6000 && access("\(hold)", F_OK) == 0; i++) usleep(10000);
      }
      return FORSETTI_OK;
      """
    try f.install(in: dir)
    let (host, port, token, me) = try Self.launch(in: dir, for: 300, extra: ["--in-process"])
    defer { host.stop() }
    try #require(host.await("started com.test.slow", timeout: 30) != nil, "\(host.lines)")

    _ = try dir.write("hold", "")
    let reload = #"{"verb":"reload","module":"com.test.slow"}"#
    let busy = try Self.open(
      port, Self.request("POST", "/api", host: me, token: token, csrf: true, body: reload))
    defer { close(busy) }
    // Its start has begun: the host's thread is in it until `hold` goes.
    var began = false
    for _ in 0..<600 where !began {
      began = FileManager.default.fileExists(atPath: holding)
      if !began { usleep(100_000) }
    }
    try #require(began, "the module's start did not begin: \(host.lines)")
    let status = #"{"verb":"status"}"#
    let waiting = try (0..<8).map { _ in
      try Self.open(port, Self.request("POST", "/api", host: me, token: token, csrf: true, body: status))
    }
    defer { for fd in waiting { close(fd) } }

    for path in ["/", "/app.js", "/app.css", "/", "/app.js", "/app.css", "/", "/"] {
      #expect(try Self.exchange(port, Self.request("GET", path, host: me)).status == 200, "\(path)")
    }
    let stream = try Self.open(
      port, "GET /api/events HTTP/1.1\r\nHost: \(me)\r\nX-Forsetti-Token: \(token)\r\n\r\n")
    defer { close(stream) }
    var streaming = false
    for _ in 0..<600 where !streaming {
      streaming = Self.answered(stream)
      if !streaming { usleep(50_000) }
    }
    #expect(streaming, "a new event stream is answered while the host's thread is busy")
    // The condition held all along: none of the nine requests for the host has an answer yet.
    #expect(
      !Self.answered(busy) && waiting.allSatisfy { !Self.answered($0) }, "the host's thread was not busy")

    try FileManager.default.removeItem(atPath: hold)
    var all = false
    for _ in 0..<1200 where !all {
      all = Self.answered(busy) && waiting.allSatisfy(Self.answered)
      if !all { usleep(50_000) }
    }
    #expect(all, "once free, the host answers the nine")
  }
}
