import FoundationEssentials
import Glibc

/// Readiness and status for a service manager (systemd's `Type=notify`): one datagram to the
/// unix socket named by `$NOTIFY_SOCKET`. Without that variable every call does nothing, so the
/// host runs the same under a terminal, a script or a unit without `Type=notify`.
///
/// Why the protocol is spoken here rather than through libsystemd's `sd_notify()`: sd_notify(3)
/// (NOTES) defines it as exactly this — "a single datagram with the state string as payload to
/// the socket referenced in the $NOTIFY_SOCKET environment variable. If the first character …
/// is / or @, the string is understood as an AF_UNIX or Linux abstract namespace socket", the
/// process credentials being attached (the kernel does that: SCM_CREDENTIALS to a receiver with
/// SO_PASSCRED); its section "Standalone Implementations" says the protocol may be reimplemented
/// "without external dependencies" and gives such examples, and systemd's interface stability
/// chart lists `$NOTIFY_SOCKET` notifications as reimplementable independently. So linking
/// libsystemd buys nothing, and the host needs no libsystemd to build or run.
///
/// A failure to notify never fails the host: each call says only whether the datagram was sent.
package enum ServiceNotifier {
  /// The manager caps a notification (systemd reads at most PIPE_BUF bytes); a longer status
  /// is cut so the datagram is never refused as a whole.
  static let maximumStatusBytes = 1024

  /// `READY=1` with a status line and the host's pid: the host started and said what it runs.
  @discardableResult
  package static func ready(status: String, socket: String? = environmentSocket) -> Bool {
    send("READY=1\nMAINPID=\(getpid())\nSTATUS=\(statusLine(status))", to: socket)
  }

  /// `STOPPING=1`: the host is stopping its modules; the manager waits for it to exit.
  @discardableResult
  package static func stopping(status: String = "stopping all modules", socket: String? = environmentSocket)
    -> Bool
  {
    send("STOPPING=1\nSTATUS=\(statusLine(status))", to: socket)
  }

  /// `STATUS=…`: the one line `systemctl status` shows under the unit.
  @discardableResult
  package static func status(_ text: String, socket: String? = environmentSocket) -> Bool {
    send("STATUS=\(statusLine(text))", to: socket)
  }

  /// The socket named by this process's `$NOTIFY_SOCKET`, if any.
  package static var environmentSocket: String? { socket(in: ProcessInfo.processInfo.environment) }

  /// The socket an environment names: an absolute path or an abstract name (`@…`); nil for
  /// none or an empty value. Other forms (systemd's `vsock:`) are not spoken and give nil.
  static func socket(in environment: [String: String]) -> String? {
    guard let s = environment["NOTIFY_SOCKET"], s.hasPrefix("/") || s.hasPrefix("@") else { return nil }
    return s
  }

  /// A status on one line (a newline would start another assignment, letting text that reaches
  /// a status, a module ID say, send `READY=1` or `MAINPID=`), within the size limit.
  static func statusLine(_ text: String) -> String {
    var out = ""
    var bytes = 0
    for u in text.unicodeScalars {
      let c = u.value < 0x20 || u.value == 0x7F ? " " : u
      bytes += String(c).utf8.count
      guard bytes <= maximumStatusBytes else { break }
      out.unicodeScalars.append(c)
    }
    return out
  }

  /// Sends `state` as one datagram to `socket`; false when there is no socket or it failed.
  static func send(_ state: String, to socket: String?) -> Bool {
    guard let socket else { return false }
    var name = Array(socket.utf8)
    // Abstract names start with a NUL in the address and are not NUL-terminated: their length
    // is the address length.
    if name.first == UInt8(ascii: "@") { name[0] = 0 }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let capacity = MemoryLayout.size(ofValue: address.sun_path)
    // A path needs room for its terminating NUL (the zeroed rest of sun_path).
    guard name.count > 1, name.count < capacity,
      let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path)
    else { return false }
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: name) }
    let length = socklen_t(pathOffset + name.count)

    let fd = Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    let payload = Array(state.utf8)
    while true {
      let sent = payload.withUnsafeBytes { bytes in
        withUnsafePointer(to: &address) {
          $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            sendto(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL), $0, length)
          }
        }
      }
      if sent < 0 && errno == EINTR { continue }
      return sent == payload.count
    }
  }
}
