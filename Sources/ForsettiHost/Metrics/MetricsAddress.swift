import Glibc

/// Where `/metrics` is served: an IPv4 or IPv6 literal and a port (0: any free port). Parsed
/// strictly from `ADDRESS:PORT`, `[V6]:PORT` or `PORT` (then 127.0.0.1); never a host name.
public struct MetricsAddress: Sendable, Equatable, CustomStringConvertible {
  /// The address as given (no brackets).
  public var host: String
  public var port: UInt16

  /// Why a `--metrics` value is not an address.
  public enum ParseError: Error, Equatable, CustomStringConvertible {
    /// The port is missing, not decimal, or over 65535.
    case badPort(String)
    /// The address is not an IPv4 or IPv6 literal.
    case badAddress(String)

    public var description: String {
      switch self {
      case .badPort(let v): "\"\(v)\" has no port 0–65535 (ADDRESS:PORT, [IPV6]:PORT or PORT)"
      case .badAddress(let v): "\"\(v)\" is no IPv4 or IPv6 address literal (host names are not resolved)"
      }
    }
  }

  public init(host: String = "127.0.0.1", port: UInt16) {
    self.host = host
    self.port = port
  }

  /// Parses `text`; the errors name it.
  public init(parsing text: String) throws(ParseError) {
    let hostPart: Substring
    let portPart: Substring
    if text.hasPrefix("[") {
      guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
        throw .badAddress(text)
      }
      hostPart = text[text.index(after: text.startIndex)..<close]
      portPart = text[text.index(close, offsetBy: 2)...]
      guard Self.isIPv6(String(hostPart)) else { throw .badAddress(text) }
    } else if let colon = text.lastIndex(of: ":") {
      hostPart = text[..<colon]
      portPart = text[text.index(after: colon)...]
      guard Self.isIPv4(String(hostPart)) else { throw .badAddress(text) }
    } else {
      hostPart = "127.0.0.1"
      portPart = Substring(text)
    }
    guard !portPart.isEmpty, portPart.utf8.count <= 5, portPart.allSatisfy({ $0.isASCII && $0.isNumber }),
      let port = UInt16(portPart)
    else { throw .badPort(text) }
    self.host = String(hostPart)
    self.port = port
  }

  public var isIPv6: Bool { host.contains(":") }

  /// Whether socket `fd` is bound to this address (any port, for port 0): one kept across an
  /// upgrade is served again only where the configuration still says.
  func isBound(to fd: Int32) -> Bool {
    var storage = sockaddr_storage()
    var size = socklen_t(MemoryLayout<sockaddr_storage>.size)
    let got = withUnsafeMutablePointer(to: &storage) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &size) }
    }
    guard got == 0 else { return false }
    var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
    let bound: UInt16
    switch Int32(storage.ss_family) {
    case AF_INET where !isIPv6:
      var a = withUnsafeBytes(of: storage) { $0.loadUnaligned(as: sockaddr_in.self) }
      guard inet_ntop(AF_INET, &a.sin_addr, &text, socklen_t(text.count)) != nil else { return false }
      bound = UInt16(bigEndian: a.sin_port)
    case AF_INET6 where isIPv6:
      var a = withUnsafeBytes(of: storage) { $0.loadUnaligned(as: sockaddr_in6.self) }
      guard inet_ntop(AF_INET6, &a.sin6_addr, &text, socklen_t(text.count)) != nil else { return false }
      bound = UInt16(bigEndian: a.sin6_port)
    default:
      return false
    }
    var mine = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
    var raw = [UInt8](repeating: 0, count: 16)
    // The configured literal in the kernel's own spelling, so `::1` and `0:0::1` compare equal.
    guard inet_pton(isIPv6 ? AF_INET6 : AF_INET, host, &raw) == 1,
      inet_ntop(isIPv6 ? AF_INET6 : AF_INET, raw, &mine, socklen_t(mine.count)) != nil
    else { return false }
    return String(cString: text) == String(cString: mine) && (port == 0 || port == bound)
  }

  /// Whether it is a loopback address (127.0.0.0/8, ::1): reachable from this machine only.
  public var isLoopback: Bool {
    if isIPv6 {
      var a = in6_addr()
      guard inet_pton(AF_INET6, host, &a) == 1 else { return false }
      return withUnsafeBytes(of: &a) { b in b.prefix(15).allSatisfy { $0 == 0 } && b[15] == 1 }
    }
    var a = in_addr()
    guard inet_pton(AF_INET, host, &a) == 1 else { return false }
    return UInt32(bigEndian: a.s_addr) >> 24 == 127
  }

  /// Whether a request's `Host` header names this server as a client on this machine does:
  /// for a loopback address, the address itself or `localhost`, with this port or none. A page
  /// in a browser that rebinds its own name to 127.0.0.1 sends its own name, and is refused.
  /// Any `Host` for another address: who can reach it is the network's business.
  public func accepts(host header: String?) -> Bool {
    guard isLoopback else { return true }
    guard let header = header?.lowercased(), !header.isEmpty else { return false }
    let names = ["localhost", isIPv6 ? "[\(host)]" : host]
    return names.contains { header == $0 || header == "\($0):\(port)" }
  }

  /// `HOST:PORT`, brackets around IPv6.
  public var description: String { isIPv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }

  static func isIPv4(_ s: String) -> Bool {
    var a = in_addr()
    return inet_pton(AF_INET, s, &a) == 1
  }

  static func isIPv6(_ s: String) -> Bool {
    var a = in6_addr()
    return inet_pton(AF_INET6, s, &a) == 1
  }
}
