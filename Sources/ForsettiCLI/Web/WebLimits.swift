import Glibc

/// What the debug screen's server takes at most, and what a client past a limit sees
/// (docs/debug-screen.md, "Limits"). Every client of a loopback server is 127.0.0.1, so the
/// server tells clients apart by the uid that owns the other end (sock_diag, `forsetti_web.h`):
/// one user holds a quarter of the connections at most, and no request's headers may take
/// longer than `headerSeconds`. What keeps the page reachable for its own user is headroom:
/// streams capped far under the connection limit, and a short silence allowed before a
/// connection is dropped.
enum WebLimits {
  /// Connections at once, half the host's open-file limit at most (the host's modules and
  /// workers need descriptors too): 2048, or 512 under systemd's default soft limit of 1024.
  /// One past it is closed at once, without an answer.
  static var connections: UInt32 {
    var limit = rlimit()
    guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 256 }
    let half = limit.rlim_cur / 2
    return UInt32(Swift.min(Swift.max(half, 64), 2048))
  }

  /// Connections at once from one client (a local uid, or a remote address): a quarter of
  /// `connections`, so one user cannot take the page from the others. One more is closed at
  /// once.
  static var perClient: UInt32 { max(16, connections / 4) }

  /// Seconds a request's headers may take, however slowly they trickle in (slowloris).
  static let headerSeconds: UInt32 = 5

  /// Seconds a connection may send and receive nothing (a request half sent, an idle keep-alive
  /// connection) before it is closed.
  static let idleSeconds: UInt32 = 10

  /// Seconds a stream may fail to take what it is sent before it is closed (a stream waiting
  /// for events is suspended, not idle).
  static let streamIdleSeconds: UInt32 = 60

  /// Event streams open at once: far under `connections`, so streams never take the slots the
  /// page's own requests need. One more is refused `503` with a text body.
  static let streams = 64

  /// Threads polling the connections (epoll); each serves many connections.
  static let threads: UInt32 = 4
}
