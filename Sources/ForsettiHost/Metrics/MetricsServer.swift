import CForsettiWeb
import ForsettiRuntime
import Glibc

/// Serves `GET`/`HEAD /metrics` (the Prometheus text format) with libmicrohttpd, opened only now
/// and never linked. No authentication: the address is the operator's choice, loopback by
/// default. Every other path is `404`, every other method `405`.
///
/// `@unchecked Sendable`: `daemon` is set in `init` before any request arrives and cleared by
/// `stop` after the daemon stopped; `render` is `Sendable`.
final class MetricsServer: @unchecked Sendable {
  private var daemon: OpaquePointer?
  private let render: @Sendable () -> String
  /// Seconds the connections open at a handover may take to finish before they are closed.
  static let handOverWithin = 1.0

  /// Where it listens, the real port in place of 0.
  private(set) var address: MetricsAddress

  /// Connections at once, seconds one may stay silent, and one thread: a scraper sends one short
  /// GET now and then (fewer than the debug screen's `WebLimits`, which serves a browser's
  /// event streams). Eight of them at most from one client (a local uid, or a remote address),
  /// and 5 s for a request's headers however they trickle: one user holding connections or
  /// sending a header line now and then leaves the other 56 to everyone else.
  static let limits = forsetti_web_limits(
    connections: 64, idle_seconds: 10, threads: 1, per_client: 8, header_seconds: 5)

  /// Why `/metrics` could not be served.
  enum StartError: Error, CustomStringConvertible {
    case unavailable(MetricsAddress)
    case libraryMissing(String)

    var description: String {
      switch self {
      case .unavailable(let a): "could not serve metrics on \(a) (in use, or no such local address?)"
      case .libraryMissing(let l):
        "--metrics needs \(l) (Debian package libmicrohttpd12), which could not be opened"
      }
    }
  }

  /// Serves on `address`; with `listening`, on that socket, already bound there and listening
  /// (the host's previous image's, handed over: the connections waiting in its backlog are
  /// answered), which the server then owns.
  init(_ address: MetricsAddress, listening: Int32? = nil, render: @escaping @Sendable () -> String)
    throws(StartError)
  {
    self.render = render
    self.address = address
    guard forsetti_web_load() != 0 else { throw .libraryMissing(String(cString: forsetti_web_library())) }
    let context = Unmanaged.passUnretained(self).toOpaque()
    // The daemon binds the address as given: sockaddr_in or sockaddr_in6, seen as a sockaddr.
    func start<Address>(_ a: Address) -> OpaquePointer? {
      withUnsafePointer(to: a) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          forsetti_web_start_on(
            $0, listening ?? -1, Self.limits, Self.onRequest, Self.onRead, Self.onClosed, context)
        }
      }
    }
    let started: OpaquePointer?
    if address.isIPv6 {
      var a = sockaddr_in6()
      a.sin6_family = sa_family_t(AF_INET6)
      a.sin6_port = address.port.bigEndian
      guard inet_pton(AF_INET6, address.host, &a.sin6_addr) == 1 else { throw .unavailable(address) }
      started = start(a)
    } else {
      var a = sockaddr_in()
      a.sin_family = sa_family_t(AF_INET)
      a.sin_port = address.port.bigEndian
      guard inet_pton(AF_INET, address.host, &a.sin_addr) == 1 else { throw .unavailable(address) }
      started = start(a)
    }
    guard let started else { throw .unavailable(address) }
    daemon = started
    self.address = MetricsAddress(host: address.host, port: forsetti_web_port(started))
  }

  /// The address to scrape.
  var url: String { "http://\(address)/metrics" }

  func stop() {
    if let d = daemon { forsetti_web_stop(d) }
    daemon = nil
  }

  /// Stops accepting, lets the requests being answered finish, and stops, leaving the listening
  /// socket open: returned (close-on-exec), for a new image of the host to serve, connections
  /// made meanwhile waiting in its backlog; nil when it could not be kept (the server stopped).
  func handOver() -> Int32? {
    guard let d = daemon else { return nil }
    let fd = forsetti_web_quiesce(d)
    // Stopping closes every connection: those accepted before the quiesce are let finish first
    // (a scrape is one short request), for `handOverWithin` at most (an idle keep-alive one).
    let end = ContinuousClock.now + .milliseconds(Int(Self.handOverWithin * 1000))
    while forsetti_web_connections(d) > 0 && ContinuousClock.now < end { usleep(1000) }
    forsetti_web_stop(d)
    daemon = nil
    guard fd >= 0 else { return nil }
    _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    return fd
  }

  /// Status and body for a request (the routing, apart from libmicrohttpd). `hostAllowed`: the
  /// request's `Host` names this server (`MetricsAddress.accepts`); else 421, nothing rendered.
  static func route(method: String, path: String, hostAllowed: Bool = true, render: () -> String)
    -> (UInt32, String, String)
  {
    let plain = "text/plain; charset=utf-8"
    guard hostAllowed else {
      return (421, plain, "misdirected request: the Host header does not name this server\n")
    }
    let bare = path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? path
    guard bare == "/metrics" else { return (404, plain, "not found: only /metrics is served\n") }
    guard method == "GET" || method == "HEAD" else {
      return (405, plain, "method not allowed: GET or HEAD\n")
    }
    return (200, MetricsText.contentType, render())
  }

  private static let onRequest: forsetti_web_handler = {
    context, connection, _, method, url, _, _, _ in
    guard let context, let connection, let method, let url else { return 0 }
    let server = Unmanaged<MetricsServer>.fromOpaque(context).takeUnretainedValue()
    let m = String(cString: method)
    let host = forsetti_web_value(connection, 0, "Host").map { String(cString: $0) }
    let (status, type, body) = route(
      method: m, path: String(cString: url), hostAllowed: server.address.accepts(host: host),
      render: server.render)
    var headers: [(String, String)] = [("Content-Type", type), ("Cache-Control", "no-store")]
    if status == 405 { headers.append(("Allow", "GET, HEAD")) }
    let strings = headers.flatMap { [strdup($0.0), strdup($0.1)] }
    defer { for s in strings { free(s) } }
    let array: [UnsafePointer<CChar>?] = strings.map { $0.map { UnsafePointer($0) } } + [nil]
    var bytes = Array(body.utf8)
    return array.withUnsafeBufferPointer { h in
      bytes.withUnsafeMutableBufferPointer { b in
        b.withMemoryRebound(to: CChar.self) {
          forsetti_web_reply(connection, status, $0.baseAddress, $0.count, h.baseAddress)
        }
      }
    }
  }

  /// No streams are served.
  private static let onRead: forsetti_web_stream_reader = { _, _, _, _, _ in -1 }
  private static let onClosed: forsetti_web_stream_closed = { _, _ in }
}
