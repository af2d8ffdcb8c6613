import CForsettiSys
import Dispatch
import ForsettiBridge
import ForsettiCore
import FoundationEssentials
import Glibc
import Synchronization

/// The host's end of `STATE/control.sock` (the protocol is in `ControlMessage.swift`): a thread
/// accepts, one thread per client reads its request (bounded, within a deadline) and checks who
/// it is, and the host's own thread serves the requests (`serve`), since they may change modules.
public final class ControlServer: Sendable {
  public let path: String
  private let fd: Int32
  private let pid: Int32
  private let stateDirectory: String
  private let wake: @Sendable () -> Void
  private let queue = Mutex<[Pending]>([])
  private let clients = Atomic<Int>(0)
  private let stopped = Atomic<Bool>(false)
  /// Clients served at once; more are told to come back.
  static let maxClients = 16

  /// A request waiting for the host's thread, and the client thread waiting for its answer.
  final class Pending: Sendable {
    let request: ControlRequest
    let answer = Mutex<ControlResponse?>(nil)
    let done = DispatchSemaphore(value: 0)
    init(_ request: ControlRequest) { self.request = request }
  }

  /// Listens on `STATE/control.sock` (replacing a socket left by a host that is gone: the
  /// caller holds the state directory's `HostLock`). `wake` is called when a request waits.
  public init(stateDirectory: String, wake: @escaping @Sendable () -> Void) throws(ControlError) {
    let dir = stateDirectory.isEmpty ? "." : stateDirectory
    path = dir + "/control.sock"
    self.stateDirectory = stateDirectory
    self.wake = wake
    pid = getpid()
    unlink(path)
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw .unreachable(path: path, errno: errno) }
    let address = UnixSocketAddress(path: path)
    defer { address.close() }
    // Made 0600 as it is made: no other user can connect even for an instant (the peer check
    // below is the second wall). Nothing else creates files at this point of the host's start.
    let old = umask(0o177)
    let bound = address.with { bind(fd, $0, $1) } ?? -1
    let bindErrno = errno
    umask(old)
    guard bound == 0, listen(fd, 16) == 0 else {
      let e = bound == 0 ? errno : bindErrno
      Glibc.close(fd)
      throw .unreachable(path: path, errno: e)
    }
    self.fd = fd
    _ = DetachedThread.start { [self] in self.acceptLoop() }
  }

  /// Serves every waiting request with `handle`, on the calling (the host's) thread.
  public func serve(_ handle: (ControlRequest) -> ControlResponse) {
    let waiting = queue.withLock { q in
      defer { q.removeAll() }
      return q
    }
    for p in waiting {
      let answer = handle(p.request)
      p.answer.withLock { $0 = answer }
      p.done.signal()
    }
  }

  /// Asks the host from another of its own threads (the debug screen's server), as a socket
  /// client would: waits until the host's thread has served it, or the answer timeout.
  public func ask(_ request: ControlRequest) -> ControlResponse {
    guard !stopped.load(ordering: .acquiring) else {
      return response(2, stderr: "forsetti-host: the host is stopping\n")
    }
    let pending = Pending(request)
    queue.withLock { $0.append(pending) }
    wake()
    guard pending.done.wait(timeout: .now() + ControlRequest.answerTimeout) == .success,
      let answer = pending.answer.withLock({ $0 })
    else {
      return response(
        2, stderr: "forsetti-host: error: \(ControlError.timedOut(ControlRequest.answerTimeout))\n")
    }
    return answer
  }

  /// Whether a request is waiting.
  public var hasWaiting: Bool { queue.withLock { !$0.isEmpty } }

  /// Stops listening and removes the socket; clients still being served get their answers.
  public func stop() {
    guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
    unlink(path)
    shutdown(fd, Int32(SHUT_RDWR))
    // Requests that will never be served now: their clients are told so.
    serve { _ in self.response(2, stderr: "forsetti-host: the host is stopping\n") }
  }

  private func response(_ status: Int32, stdout: String = "", stderr: String) -> ControlResponse {
    ControlResponse(status: status, stdout: stdout, stderr: stderr, pid: pid, stateDirectory: stateDirectory)
  }

  private func acceptLoop() {
    while !stopped.load(ordering: .acquiring) {
      let client = forsetti_accept_cloexec(fd)
      if client < 0 {
        if errno == EINTR || errno == ECONNABORTED { continue }
        break
      }
      guard clients.add(1, ordering: .acquiringAndReleasing).newValue <= Self.maxClients else {
        clients.subtract(1, ordering: .acquiringAndReleasing)
        send(
          response(2, stderr: "forsetti-host: the host is busy with other clients; try again\n"), to: client)
        Glibc.close(client)
        continue
      }
      _ = DetachedThread.start { [self] in
        self.handle(client)
        Glibc.close(client)
        self.clients.subtract(1, ordering: .acquiringAndReleasing)
      }
    }
    Glibc.close(fd)
  }

  private func handle(_ client: Int32) {
    var timeout = timeval(tv_sec: Int(ControlRequest.requestTimeout), tv_usec: 0)
    setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var peer: UInt32 = 0
    guard forsetti_peer_uid(client, &peer) == 0 else { return }
    let own = geteuid()
    guard peer == own || peer == 0 else {
      let refusal = ControlError.refused(peerUID: peer, hostUID: own)
      send(response(2, stderr: "forsetti-host: error: \(refusal)\n"), to: client)
      return
    }
    guard let line = Self.readLine(client) else {
      send(
        response(
          2, stderr: "forsetti-host: error: no complete request within \(ControlRequest.requestTimeout) s\n"),
        to: client)
      return
    }
    let request: ControlRequest
    switch ControlRequest.decode(line) {
    case .failure(let e):
      send(response(2, stderr: "forsetti-host: error: \(e)\n"), to: client)
      return
    case .success(let r): request = r
    }
    let pending = Pending(request)
    queue.withLock { $0.append(pending) }
    wake()
    guard pending.done.wait(timeout: .now() + ControlRequest.answerTimeout) == .success,
      let answer = pending.answer.withLock({ $0 })
    else {
      send(
        response(2, stderr: "forsetti-host: error: \(ControlError.timedOut(ControlRequest.answerTimeout))\n"),
        to: client)
      return
    }
    send(answer, to: client)
  }

  /// One line from a client, without its newline; nil when it is too long, closed early or slow.
  static func readLine(_ fd: Int32) -> [UInt8]? {
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while bytes.count <= ControlRequest.maxLine {
      let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { return nil }
      if let nl = chunk[0..<n].firstIndex(of: 0x0A) {
        bytes += chunk[0..<nl]
        return bytes
      }
      bytes += chunk[0..<n]
    }
    return nil
  }

  private func send(_ r: ControlResponse, to fd: Int32) {
    let bytes = r.line
    var sent = 0
    while sent < bytes.count {
      let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { return }
      sent += n
    }
  }
}
