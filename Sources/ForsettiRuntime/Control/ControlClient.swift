import ForsettiCore
import Glibc

/// The client's end of a running host's control socket.
public enum ControlClient {
  /// What asking came to.
  public enum Outcome: Sendable, Equatable {
    case answered(ControlResponse)
    /// No host runs on the state directory (no socket, or nobody listening on it).
    case noHost
    case failed(ControlError)
  }

  /// Sends `request` to the host running on `stateDirectory` and waits for its answer.
  public static func ask(_ request: ControlRequest, stateDirectory: String) -> Outcome {
    let path = (stateDirectory.isEmpty ? "." : stateDirectory) + "/control.sock"
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return .failed(.unreachable(path: path, errno: errno)) }
    defer { close(fd) }
    let address = UnixSocketAddress(path: path)
    defer { address.close() }
    guard let rc = address.with({ connect(fd, $0, $1) }) else {
      return .failed(.unreachable(path: path, errno: ENAMETOOLONG))
    }
    if rc != 0 {
      let e = errno
      // No socket, or one left by a host that is gone: nobody to ask.
      if e == ENOENT || e == ECONNREFUSED || e == ENOTDIR { return .noHost }
      return .failed(.unreachable(path: path, errno: e))
    }
    var timeout = timeval(tv_sec: Int(ControlRequest.answerTimeout) + 5, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    let bytes = request.line
    var sent = 0
    while sent < bytes.count {
      let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
      if n < 0 && errno == EINTR { continue }
      // A host that refuses a client answers and closes at once: read what it said.
      guard n > 0 else { break }
      sent += n
    }
    guard let line = ControlServer.readLine(fd) else {
      return .failed(.timedOut(ControlRequest.answerTimeout))
    }
    switch ControlResponse.decode(line) {
    case .success(let r): return .answered(r)
    case .failure(let e): return .failed(e)
    }
  }
}
