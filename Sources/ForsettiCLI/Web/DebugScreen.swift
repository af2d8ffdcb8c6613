import CForsettiWeb
import ForsettiCore
import ForsettiRuntime
import FoundationEssentials
import Glibc

/// The debug screen: a page on 127.0.0.1 for the running host (`run --ui`, `dev --ui`), served by
/// libmicrohttpd (no parser of ours reads network input). The page itself (`/`, `app.js`,
/// `app.css`) is the same for every host and holds nothing of it; everything about the host
/// (`/api`, `/api/events`) needs the one-time token in the header `X-Forsetti-Token`, never a
/// cookie: a browser sends a cookie to every port of 127.0.0.1, a header only where the page
/// puts it. The page takes the token from the address the host printed (`?token=`) and keeps it
/// in its tab's `sessionStorage`, which is per origin, port included, so pages of several hosts
/// live side by side. Every request must name the loopback address in its `Host` header (no DNS
/// rebinding); a `POST` must carry `X-Forsetti-Request: 1` besides. `POST /api` takes the control
/// socket's typed requests (`docs/control.md`) and the host's thread answers them; `GET /api/events`
/// streams what happens (server-sent events), at most `WebLimits.streams` at once.
///
/// `@unchecked Sendable`: `daemon` and `port` are set once in `init` (before any request can
/// arrive: the daemon's threads read them only after it started) and `daemon` is cleared by
/// `stop` on the host's thread after the daemon has stopped; everything else is immutable or
/// `Sendable`.
final class DebugScreen: @unchecked Sendable {
  private(set) var port: UInt16 = 0
  let token: String
  let events: WebEvents
  private let asks = WebAsks()
  private let ask: @Sendable (ControlRequest) -> ControlResponse
  private var daemon: OpaquePointer?

  /// Why the page could not be served.
  /// Why the debug screen could not start.
  enum StartError: Error, CustomStringConvertible {
    /// Nothing could listen on the port.
    case portUnavailable(UInt16)
    /// libmicrohttpd (opened only now, not linked) is not installed.
    case libraryMissing(String)

    var description: String {
      switch self {
      case .portUnavailable(let port):
        "could not serve the debug screen on 127.0.0.1:\(port) (in use? try another --ui-port, or 0 for any)"
      case .libraryMissing(let library):
        "the debug screen needs \(library) (Debian package libmicrohttpd12), which could not be opened"
      }
    }
  }

  init(port: UInt16, events: WebEvents, ask: @escaping @Sendable (ControlRequest) -> ControlResponse)
    throws(StartError)
  {
    var random = SystemRandomNumberGenerator()
    token = (0..<16).map { _ in
      let byte = UInt8.random(in: 0...255, using: &random)
      return (byte < 16 ? "0" : "") + String(byte, radix: 16)
    }.joined()
    self.events = events
    self.ask = ask
    let context = Unmanaged.passUnretained(self).toOpaque()
    let limits = forsetti_web_limits(
      connections: WebLimits.connections, idle_seconds: WebLimits.idleSeconds, threads: WebLimits.threads,
      per_client: WebLimits.perClient, header_seconds: WebLimits.headerSeconds)
    guard forsetti_web_load() != 0 else { throw .libraryMissing(String(cString: forsetti_web_library())) }
    guard let d = forsetti_web_start(port, limits, Self.onRequest, Self.onRead, Self.onClosed, context) else {
      throw .portUnavailable(port)
    }
    daemon = d
    self.port = forsetti_web_port(d)
  }

  /// The address to open, token included (the page moves it out of the address bar at once).
  var url: String { "http://127.0.0.1:\(port)/?token=\(token)" }

  func stop() {
    events.stop()
    asks.stop()
    if let d = daemon { forsetti_web_stop(d) }
    daemon = nil
  }

  // MARK: - Requests

  /// An answer: status, content type, body, and headers of its own.
  struct Reply {
    var status: UInt32
    var type: String
    var body: [UInt8]
    var headers: [(String, String)] = []

    static func json(_ status: UInt32, _ v: JSONValue) -> Reply {
      Reply(status: status, type: "application/json", body: Array(JSONWriter.string(v).utf8))
    }

    static func refusal(_ status: UInt32, _ why: String) -> Reply {
      json(status, .object(JSONObject([("error", .string(why))])))
    }
  }

  /// The headers of every answer: nothing may frame it, load it from elsewhere, or cache it.
  static let securityHeaders: [(String, String)] = [
    (
      "Content-Security-Policy",
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    ("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"), ("Cache-Control", "no-store"),
    ("X-Frame-Options", "DENY"),
  ]

  /// The header that carries the token.
  static let tokenHeader = "X-Forsetti-Token"

  /// What the server does with a request.
  enum Routed {
    case reply(Reply)
    /// A control request for the host's thread.
    case ask(ControlRequest)
    /// The event stream.
    case stream
  }

  /// What a request gets, before any body is read into a verb: the checks, then the route.
  func route(method: String, path: String, value: (Int32, String) -> String?, body: [UInt8], tooLarge: Bool)
    -> Routed
  {
    switch check(method: method, path: path, value: value, body: body, tooLarge: tooLarge) {
    case .success(let r): return r
    case .failure(let refusal): return .reply(refusal.reply)
    }
  }

  /// A refusal, as the error of `check`.
  struct Refusal: Error { var reply: Reply }

  private func check(
    method: String, path: String, value: (Int32, String) -> String?, body: [UInt8], tooLarge: Bool
  ) -> Result<Routed, Refusal> {
    let host = value(0, "Host") ?? ""
    guard host == "127.0.0.1:\(port)" || host == "localhost:\(port)" else {
      return .failure(
        Refusal(
          reply: .refusal(421, "this page answers only http://127.0.0.1:\(port) and http://localhost:\(port)")
        ))
    }
    switch (method, path) {
    // The page: the same for every host, nothing of this one in it, so it loads without the
    // token and can say itself what is wrong when the token is (a restarted host).
    case ("GET", "/"), ("GET", "/index.html"):
      return .success(.reply(Reply(status: 200, type: "text/html; charset=utf-8", body: WebAssets.indexHTML)))
    case ("GET", "/app.js"):
      return .success(
        .reply(Reply(status: 200, type: "text/javascript; charset=utf-8", body: WebAssets.appJS)))
    case ("GET", "/app.css"):
      return .success(.reply(Reply(status: 200, type: "text/css; charset=utf-8", body: WebAssets.appCSS)))
    case (_, "/"), (_, "/index.html"), (_, "/app.js"), (_, "/app.css"):
      return .failure(Refusal(reply: .refusal(405, "\(method) is not allowed here")))
    case (_, "/api"), (_, "/api/events"):
      guard Self.equal(value(0, Self.tokenHeader) ?? "", token) else {
        return .failure(
          Refusal(
            reply: .refusal(
              401, "the token is missing or not this host's (restarted?): open the address the host printed"))
        )
      }
      switch (method, path) {
      case ("GET", "/api/events"):
        return .success(.stream)
      case ("POST", "/api"):
        guard value(0, "X-Forsetti-Request") == "1" else {
          return .failure(Refusal(reply: .refusal(403, "a POST needs the header X-Forsetti-Request: 1")))
        }
        guard !tooLarge else { return .failure(Refusal(reply: .refusal(413, "a request larger than 1 MiB"))) }
        return api(body).map { .ask($0) }
      default:
        return .failure(Refusal(reply: .refusal(405, "\(method) is not allowed here")))
      }
    default:
      return .failure(Refusal(reply: .refusal(404, "no such page: \(path)")))
    }
  }

  /// The answer to one stream too many: text the page shows as it is, and the connection closed
  /// so its slot is free at once.
  static let streamsFull = Reply(
    status: 503, type: "text/plain; charset=utf-8",
    body: Array(
      ("live events refused: this host already serves \(WebLimits.streams) event streams, its most. "
        + "Close another page of this host (a closed page is noticed within \(2 * WebEvents.keepAlive) s); "
        + "the page retries by itself.").utf8),
    headers: [("Connection", "close"), ("Retry-After", "10")])

  /// A typed control request (`{"verb":"explain","module":"com.x"}`, the `request` object of
  /// docs/control.md), decoded as strictly as the socket decodes it, for the host's thread.
  private func api(_ body: [UInt8]) -> Result<ControlRequest, Refusal> {
    guard let value = try? JSONParser.parse(body) else {
      return .failure(Refusal(reply: .refusal(400, "expected a control request object {\"verb\":…}")))
    }
    switch ControlCommand.decode(value) {
    case .failure(let e): return .failure(Refusal(reply: .refusal(400, e.description)))
    case .success(let command): return .success(ControlRequest(command))
    }
  }

  /// The host's answer to `request`, as the page gets it.
  func answer(_ request: ControlRequest) -> Reply {
    Reply(status: 200, type: "application/json", body: Array(ask(request).line.dropLast()))
  }

  /// What a request waiting for the host gets when the server stops first.
  static let stopping = Reply.refusal(503, "the host is stopping")

  /// Compares without stopping at the first difference (the token is a secret).
  static func equal(_ a: String, _ b: String) -> Bool {
    let x = Array(a.utf8)
    let y = Array(b.utf8)
    guard x.count == y.count else { return false }
    var diff: UInt8 = 0
    for i in x.indices { diff |= x[i] ^ y[i] }
    return diff == 0
  }

  private static func send(_ r: Reply, _ connection: OpaquePointer?) -> Int32 {
    let headers = securityHeaders + [("Content-Type", r.type)] + r.headers
    return withHeaders(headers) { h in
      r.body.withUnsafeBufferPointer { b in
        b.withMemoryRebound(to: CChar.self) {
          forsetti_web_reply(connection, r.status, $0.baseAddress, $0.count, h)
        }
      }
    }
  }

  /// Calls `body` with `headers` as the C array of name, value, …, NULL.
  private static func withHeaders(
    _ headers: [(String, String)], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> Int32
  ) -> Int32 {
    let strings = headers.flatMap { [strdup($0.0), strdup($0.1)] }
    defer { for s in strings { free(s) } }
    let array: [UnsafePointer<CChar>?] = strings.map { $0.map { UnsafePointer($0) } } + [nil]
    return array.withUnsafeBufferPointer { p in
      // libmicrohttpd copies the headers during the call.
      guard let base = p.baseAddress else { return 0 }
      return body(base)
    }
  }

  private static let onRequest: forsetti_web_handler = {
    context, connection, request, method, url, body, length, tooLarge in
    guard let context, let connection, let method, let url else { return 0 }
    let screen = Unmanaged<DebugScreen>.fromOpaque(context).takeUnretainedValue()
    // Called again once the host answered (or the server stopped).
    switch screen.asks.take(request) {
    case .answered(let reply): return send(reply, connection)
    case .abandoned: return send(stopping, connection)
    case .waiting: return 1
    case nil: break
    }
    let m = String(cString: method)
    let path = String(cString: url)
    let value: (Int32, String) -> String? = { kind, name in
      forsetti_web_value(connection, kind, name).map { String(cString: $0) }
    }
    let bytes =
      body.map { Array(UnsafeRawBufferPointer(start: $0, count: length).bindMemory(to: UInt8.self)) } ?? []
    switch screen.route(method: m, path: path, value: value, body: bytes, tooLarge: tooLarge != 0) {
    case .reply(let reply):
      return send(reply, connection)
    case .stream:
      guard let id = screen.events.subscribe() else { return send(streamsFull, connection) }
      let headers = securityHeaders + [("Content-Type", "text/event-stream")]
      return withHeaders(headers) {
        forsetti_web_reply_stream(connection, id, WebLimits.streamIdleSeconds, $0)
      }
    case .ask(let question):
      let started = screen.asks.start(request, connection: connection) { screen.answer(question) }
      return started ? 1 : send(stopping, connection)
    }
  }

  private static let onRead: forsetti_web_stream_reader = { context, id, connection, buffer, max in
    guard let context, let connection, let buffer else { return -1 }
    let screen = Unmanaged<DebugScreen>.fromOpaque(context).takeUnretainedValue()
    let chunk: [UInt8]
    switch screen.events.next(id, connection: connection, max: max) {
    case .end: return -1
    case .suspended: return 0
    case .bytes(let b): chunk = b
    }
    let n = Swift.min(chunk.count, max)
    chunk.withUnsafeBytes { src in
      if let base = src.baseAddress { UnsafeMutableRawPointer(buffer).copyMemory(from: base, byteCount: n) }
    }
    return n
  }

  private static let onClosed: forsetti_web_stream_closed = { context, id in
    guard let context else { return }
    Unmanaged<DebugScreen>.fromOpaque(context).takeUnretainedValue().events.unsubscribe(id)
  }
}
