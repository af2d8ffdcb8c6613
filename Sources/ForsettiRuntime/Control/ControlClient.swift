import CForsettiSys
import ForsettiCore
import Glibc

/// The client's end of a running host's control socket. Before it sends anything it checks who
/// listens (SO_PEERCRED): root or the caller's own user, and the pid `STATE/host.lock` names;
/// anything else is refused unread, so an impostor's socket gets no request and shows nothing.
package enum ControlClient {
  /// What asking came to.
  package enum Outcome: Sendable, Equatable {
    case answered(ControlResponse)
    /// No host runs on the state directory (no socket, or nobody listening on it).
    case noHost
    case failed(ControlError)
  }

  /// Sends `request` to the host running on `stateDirectory` and waits for its answer; while
  /// the host says it is busy, tries again with growing pauses for up to `busyRetry` seconds.
  package static func ask(
    _ request: ControlRequest, stateDirectory: String, busyRetry: Double = ControlRequest.busyRetry
  ) -> Outcome {
    let giveUp = ControlSocketIO.deadline(in: busyRetry)
    var pause = 0.05
    while true {
      let outcome = askOnce(request, stateDirectory: stateDirectory)
      guard case .answered(let r) = outcome, r.isBusy else { return outcome }
      guard ContinuousClock.now + .milliseconds(Int64(pause * 1000)) < giveUp else {
        return .failed(.busy(busyRetry))
      }
      usleep(UInt32(pause * 1_000_000))
      pause = min(pause * 2, 1.0)
    }
  }

  /// One connection: check the listener, send, read the answer.
  static func askOnce(_ request: ControlRequest, stateDirectory: String) -> Outcome {
    let dir = stateDirectory.isEmpty ? "." : stateDirectory
    let path = dir + "/control.sock"
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return .failed(.unreachable(path: path, errno: errno)) }
    defer { close(fd) }
    // A connect to a listener whose queue is full waits; not for ever.
    var timeout = timeval(tv_sec: Int(ControlRequest.requestTimeout), tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
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
    let peerPID: Int32
    switch check(fd, path: path, lockPath: dir + "/host.lock") {
    case .failure(let refusal): return .failed(refusal)
    case .success(let pid): peerPID = pid
    }
    // A host that refuses a client answers and closes at once: whatever was not sent, read
    // what it said.
    ControlSocketIO.send(
      request.line, to: fd, until: ControlSocketIO.deadline(in: ControlRequest.requestTimeout))
    let answerBy = ControlSocketIO.deadline(
      in: ControlRequest.answerTimeout + ControlRequest.sendTimeout + ControlRequest.requestTimeout)
    switch ControlSocketIO.readLine(fd, until: answerBy) {
    case .line(let line):
      switch ControlResponse.decode(line) {
      case .success(let r): return .answered(r)
      case .failure(let e): return .failed(e)
      }
    case .closed: return .failed(.hostGone(pid: peerPID))
    case .tooLong: return .failed(.malformed("an answer longer than \(ControlRequest.maxLine) bytes"))
    case .timedOut: return .failed(.timedOut(ControlRequest.answerTimeout))
    }
  }

  /// The listener's pid, or why it is not to be trusted: it must be root or this user, and
  /// the process `lockPath` names. A host that runs as root keeps host.lock to itself (0600):
  /// a user who cannot read it trusts a root listener on its uid alone, as root can do
  /// anything a host can.
  static func check(_ fd: Int32, path: String, lockPath: String) -> Result<Int32, ControlError> {
    var uid: UInt32 = 0
    var pid: Int32 = 0
    guard forsetti_peer_credentials(fd, &uid, &pid) == 0 else {
      return .failure(.unreachable(path: path, errno: errno))
    }
    let own = geteuid()
    guard uid == 0 || uid == own else {
      return .failure(.untrustedListener(path: path, peerUID: uid, peerPID: pid, ownUID: own))
    }
    switch recordedPID(lockPath) {
    case .pid(let recorded) where recorded == pid:
      return .success(pid)
    case .unreadable where uid == 0 && own != 0:
      return .success(pid)
    case .pid(let recorded):
      return .failure(
        .notTheHost(path: path, peerUID: uid, peerPID: pid, lockPath: lockPath, lockPID: recorded))
    case .unreadable, .none:
      return .failure(.notTheHost(path: path, peerUID: uid, peerPID: pid, lockPath: lockPath, lockPID: nil))
    }
  }

  /// What a host lock file says (read, never locked: the host holds it).
  enum Recorded: Equatable {
    case pid(Int32)
    /// Not allowed to read it.
    case unreadable
    /// Missing, or no pid in it.
    case none
  }

  static func recordedPID(_ lockPath: String) -> Recorded {
    let fd = open(lockPath, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
    guard fd >= 0 else { return errno == EACCES || errno == EPERM ? .unreadable : .none }
    defer { close(fd) }
    var st = stat()
    guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return .none }
    var buffer = [UInt8](repeating: 0, count: 32)
    let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 31, 0) }
    guard n > 0 else { return .none }
    let text = String(decoding: buffer[0..<n], as: UTF8.self).filter { !$0.isWhitespace }
    return Int32(text).map { .pid($0) } ?? .none
  }
}
