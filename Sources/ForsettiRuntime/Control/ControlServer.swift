import CForsettiSys
import Dispatch
import ForsettiBridge
import ForsettiCore
import FoundationEssentials
import Glibc
import Synchronization

/// The host's end of `STATE/control.sock` (the protocol is in `ControlRequest.swift`; the limits
/// in docs/control.md). One thread accepts and reads every client's request line with `poll`,
/// each connection against one deadline for its whole line, so slow clients cost a descriptor
/// and a few bytes, never a thread. A request read whole gets a thread that waits for the
/// host's own thread to serve it (`serve`, since it may change modules) and sends the answer
/// against a deadline of its own.
package final class ControlServer: Sendable {
  package let path: String
  private let fd: Int32
  private let pid: Int32
  private let stateDirectory: String
  private let wake: @Sendable () -> Void
  private let queue = Mutex<[Pending]>([])
  /// Requests read and not yet answered, per client uid.
  private let inFlight = Mutex<[UInt32: Int]>([:])
  private let stopped = Atomic<Bool>(false)
  /// Set while the host hands its socket to a new image (`quiesce`): the one reading thread
  /// pauses, the socket left listening, and connections wait in its backlog for the new image.
  private let handingOver = Atomic<Bool>(false)
  /// The reading thread is paused (or about to be): `resume` or `stop` wakes it once.
  private let paused = Atomic<Bool>(false)
  /// Signalled by the reading thread as it pauses; waited on by `quiesce`.
  private let pauseAck = DispatchSemaphore(value: 0)
  /// Signalled to wake a paused reading thread.
  private let unpause = DispatchSemaphore(value: 0)
  /// The socket file this server made (device, inode): `stop` removes the path only while it
  /// still is this file, never a socket another host made there since.
  private let made: FileIdentity?

  /// Connections still sending their request, per client uid; a new one past this ends the
  /// uid's oldest if it has been at it for `evictAfter` (told "busy"), else is told "busy"
  /// itself: a client that sends its line within that second is never pushed out.
  static let maxReadingPerUID = 64
  /// How long a client must have been sending its request before a newcomer may push it out.
  static let evictAfter: Duration = .seconds(1)
  /// Requests read and waiting for (or sending) their answer, in all and per client uid.
  static let maxInFlight = 16
  static let maxInFlightPerUID = 12
  /// Room kept beyond those caps for `status`, so it always has a way through.
  static let statusLane = 4
  /// How long a handover waits for the lines of clients accepted just before it.
  static let lineWait: Duration = .milliseconds(250)
  /// The longest `poll` waits, so a stop is noticed soon.
  private static let tick: Int32 = 100

  /// A request waiting for the host's thread, and the client thread waiting for its answer.
  final class Pending: Sendable {
    let request: ControlRequest
    let answer = Mutex<ControlResponse?>(nil)
    let done = DispatchSemaphore(value: 0)
    init(_ request: ControlRequest) { self.request = request }
  }

  /// A file's identity, as `stat` gives it.
  struct FileIdentity: Sendable, Equatable {
    var device: UInt64
    var inode: UInt64

    /// The identity of what `path` names now (not following a last symbolic link).
    init?(path: String) {
      var st = stat()
      guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFSOCK else { return nil }
      device = UInt64(st.st_dev)
      inode = UInt64(st.st_ino)
    }
  }

  /// Listens on `STATE/control.sock` (replacing a socket left by a host that is gone: the
  /// caller holds the state directory's `HostLock`). `wake` is called when a request waits.
  package init(stateDirectory: String, wake: @escaping @Sendable () -> Void) throws(ControlError) {
    let dir = stateDirectory.isEmpty ? "." : stateDirectory
    path = dir + "/control.sock"
    self.stateDirectory = stateDirectory
    self.wake = wake
    pid = getpid()
    // Bound under a name of its own and renamed into place once listening: a client that
    // finds `control.sock` can connect (between bind and listen it would be refused, and a
    // client takes a refusal for "no host runs").
    let staging = dir + "/control.sock.tmp-\(pid)"
    unlink(staging)
    let fd = socket(
      AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
    guard fd >= 0 else { throw .unreachable(path: path, errno: errno) }
    let address = UnixSocketAddress(path: staging)
    defer { address.close() }
    // Made 0600 as it is made: no other user can connect even for an instant (the peer check
    // below is the second wall). Nothing else creates files at this point of the host's start.
    let old = umask(0o177)
    let bound = address.with { bind(fd, $0, $1) } ?? -1
    let bindErrno = errno
    umask(old)
    guard bound == 0, listen(fd, 64) == 0 else {
      let e = bound == 0 ? errno : bindErrno
      Glibc.close(fd)
      unlink(staging)
      throw .unreachable(path: path, errno: e)
    }
    // rename replaces a socket left by a host that is gone (this one holds the lock).
    guard rename(staging, path) == 0 else {
      let e = errno
      Glibc.close(fd)
      unlink(staging)
      throw .unreachable(path: path, errno: e)
    }
    made = FileIdentity(path: path)
    self.fd = fd
    _ = DetachedThread.start { [self] in self.readLoop() }
  }

  /// Serves the listening socket an image of this process made before an upgrade (`Handover`):
  /// the connections waiting in its backlog meanwhile are served now.
  package init(adopting fd: Int32, stateDirectory: String, wake: @escaping @Sendable () -> Void) {
    let dir = stateDirectory.isEmpty ? "." : stateDirectory
    path = dir + "/control.sock"
    self.stateDirectory = stateDirectory
    self.wake = wake
    pid = getpid()
    _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    made = FileIdentity(path: path)
    self.fd = fd
    _ = DetachedThread.start { [self] in self.readLoop() }
  }

  /// The listening socket, for a handover.
  package var listeningDescriptor: Int32 { fd }

  /// Stops taking requests for a handover, leaving the socket listening: the clients still
  /// sending theirs and the requests not yet served are told "busy" (they ask again, and the
  /// new image answers); then waits up to `within` seconds for every answer being sent to be
  /// sent. False when one was not (the handover should not go on: its client would be cut).
  package func quiesce(within: Double) -> Bool {
    // An acknowledgement left from a quiesce that gave up waiting must not stand for this one's.
    while pauseAck.wait(timeout: .now()) == .success {}
    guard !stopped.load(ordering: .acquiring), !handingOver.exchange(true, ordering: .acquiringAndReleasing)
    else {
      return false
    }
    let end = ContinuousClock.now + .milliseconds(Int64(within * 1000))
    // The reading thread looks at the flag at least every `tick` (unless accepting a flood).
    guard pauseAck.wait(timeout: .now() + .milliseconds(Int(within * 1000))) == .success else { return false }
    while true {
      // Again at each turn: a request the reading thread dispatched just before it ended is
      // queued by its own thread, which may come after any one look.
      serve { _ in self.handingOverAnswer }
      if inFlight.withLock({ $0.values.reduce(0, +) }) == 0 { return true }
      guard ContinuousClock.now < end else { return false }
      usleep(1000)
    }
  }

  /// Takes requests again after a handover that did not happen.
  package func resume() {
    guard handingOver.exchange(false, ordering: .acquiringAndReleasing) else { return }
    // Woken once, if it paused; one that had not yet paused sees the flag down and goes on.
    if paused.exchange(false, ordering: .acquiringAndReleasing) { unpause.signal() }
  }

  /// Serves every waiting request with `handle`, on the calling (the host's) thread; `status`
  /// first, so a slow verb ahead of it does not hold it up.
  package func serve(_ handle: (ControlRequest) -> ControlResponse) {
    let waiting = queue.withLock { q in
      defer { q.removeAll() }
      return q
    }
    let ordered =
      waiting.filter { $0.request.verb == "status" } + waiting.filter { $0.request.verb != "status" }
    for p in ordered {
      let answer = handle(p.request)
      p.answer.withLock { $0 = answer }
      p.done.signal()
    }
  }

  /// Asks the host from another of its own threads (the debug screen's server), as a socket
  /// client would: waits until the host's thread has served it, or the answer timeout.
  package func ask(_ request: ControlRequest) -> ControlResponse {
    guard !stopped.load(ordering: .acquiring) else { return stopping }
    return wait(for: request)
  }

  /// Stops listening and removes the socket if it still is the one this server made; clients
  /// still being served get their answers.
  package func stop() {
    guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
    if paused.exchange(false, ordering: .acquiringAndReleasing) { unpause.signal() }
    if let made, FileIdentity(path: path) == made { unlink(path) }
    shutdown(fd, Int32(SHUT_RDWR))
    // Requests that will never be served now: their clients are told so (and try again, to
    // find no host, or the next one).
    serve { _ in self.stopping }
  }

  private var stopping: ControlResponse { response(.busy, "the host is stopping") }

  private var busy: ControlResponse { response(.busy, "the host is busy with other clients; try again") }

  private var handingOverAnswer: ControlResponse {
    response(.busy, "the host is handing over to a new image of itself; try again")
  }

  private func response(_ code: ControlFailure.Code, _ message: String) -> ControlResponse {
    ControlResponse(pid: pid, stateDirectory: stateDirectory, outcome: .failed(ControlFailure(code, message)))
  }

  /// Queues `request` for the host's thread and waits for its answer.
  private func wait(for request: ControlRequest) -> ControlResponse {
    let pending = Pending(request)
    queue.withLock { $0.append(pending) }
    wake()
    guard pending.done.wait(timeout: .now() + ControlRequest.answerTimeout) == .success,
      let answer = pending.answer.withLock({ $0 })
    else {
      return response(.timedOut, ControlError.timedOut(ControlRequest.answerTimeout).description)
    }
    return answer
  }

  /// A client still sending its request line.
  private struct Reading {
    var fd: Int32
    var uid: UInt32
    var accepted = ContinuousClock.now
    var deadline: ContinuousClock.Instant
    var bytes: [UInt8] = []
  }

  /// What a read of a client's ready bytes came to.
  private enum Progress {
    case more
    case line([UInt8])
    case closed
    case tooLong
  }

  private func readLoop() {
    var reading: [Reading] = []
    while !stopped.load(ordering: .acquiring) {
      if handingOver.load(ordering: .acquiring) {
        pause(&reading)
        continue
      }
      let now = ContinuousClock.now
      reading.removeAll { r in
        guard r.deadline <= now else { return false }
        finish(
          r.fd,
          response(.usage, "no complete request within \(ControlRequest.requestTimeout) s of connecting"))
        return true
      }
      var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
      fds += reading.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
      let timeout = reading.map(\.deadline).min().map {
        ControlSocketIO.milliseconds(until: $0, cap: Self.tick)
      }
      let n = poll(&fds, nfds_t(fds.count), timeout ?? Self.tick)
      if n < 0 {
        if errno == EINTR { continue }
        break
      }
      guard n > 0 else { continue }
      var finished: Set<Int> = []
      for i in reading.indices where fds[i + 1].revents != 0 {
        switch Self.progress(&reading[i]) {
        case .more: continue
        case .line(let line): dispatch(line, from: reading[i])
        case .closed: Glibc.close(reading[i].fd)
        case .tooLong:
          finish(
            reading[i].fd,
            response(.usage, "a request longer than \(ControlRequest.maxLine) bytes"))
        }
        finished.insert(i)
      }
      if !finished.isEmpty {
        reading = reading.enumerated().filter { !finished.contains($0.offset) }.map(\.element)
      }
      if fds[0].revents != 0 { acceptAll(into: &reading) }
    }
    for r in reading { finish(r.fd, stopping) }
    Glibc.close(fd)
  }

  /// The reading thread during a handover: the clients still sending are told "busy", then it
  /// waits, reading nothing, until `resume` or `stop` (or the exec, which ends it).
  private func pause(_ reading: inout [Reading]) {
    // A client accepted a moment ago may not have sent its line yet: it is read first (for
    // `lineWait` at most), so it is told "busy" rather than cut off — a socket closed before
    // its client sent, or with the request unread (a reset), loses the answer.
    let end = ContinuousClock.now + Self.lineWait
    while !reading.isEmpty, ContinuousClock.now < end {
      var fds = reading.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
      let n = poll(&fds, nfds_t(fds.count), ControlSocketIO.milliseconds(until: end, cap: Self.tick))
      if n < 0 && errno != EINTR { break }
      var done: Set<Int> = []
      for i in reading.indices where fds[i].revents != 0 {
        switch Self.progress(&reading[i]) {
        case .more: continue
        case .closed: Glibc.close(reading[i].fd)
        case .line, .tooLong: finish(reading[i].fd, handingOverAnswer)
        }
        done.insert(i)
      }
      reading = reading.enumerated().filter { !done.contains($0.offset) }.map(\.element)
    }
    for r in reading { finish(r.fd, handingOverAnswer) }
    reading.removeAll()
    paused.store(true, ordering: .releasing)
    pauseAck.signal()
    // Resumed (or stopped) before it could sleep, with nobody left to wake it: go on.
    if !handingOver.load(ordering: .acquiring) || stopped.load(ordering: .acquiring),
      paused.exchange(false, ordering: .acquiringAndReleasing)
    {
      return
    }
    unpause.wait()
  }

  /// Accepts every waiting client, refuses those of another user, and makes room.
  private func acceptAll(into reading: inout [Reading]) {
    while true {
      let client = forsetti_accept_cloexec(fd)
      if client < 0 {
        if errno == EINTR || errno == ECONNABORTED { continue }
        return
      }
      _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
      var peer: UInt32 = 0
      guard forsetti_peer_uid(client, &peer) == 0 else {
        Glibc.close(client)
        continue
      }
      let own = geteuid()
      guard peer == own || peer == 0 else {
        finish(
          client,
          response(.refused, ControlError.refused(peerUID: peer, hostUID: own).description))
        continue
      }
      // A client whose whole request is there already (the command line sends it as it
      // connects) is served at once and takes no reading slot: clients of its uid connecting in
      // a loop and sending nothing, however many, cannot keep `status` out.
      var first = Reading(
        fd: client, uid: peer, deadline: ControlSocketIO.deadline(in: ControlRequest.requestTimeout))
      switch Self.progress(&first) {
      case .line(let line):
        dispatch(line, from: first)
        continue
      case .closed:
        Glibc.close(client)
        continue
      case .tooLong:
        finish(client, response(.usage, "a request longer than \(ControlRequest.maxLine) bytes"))
        continue
      case .more: break
      }
      // At this uid's cap, the oldest of its clients still sending goes if it has had
      // `evictAfter` already (a real client sends its line as it connects, so that one is slow);
      // if even the oldest is younger, the newcomer is told "busy" instead, so that clients
      // reconnecting in a loop cannot push out one that connected a moment before them.
      let mine = reading.indices.filter { reading[$0].uid == peer }
      if mine.count >= Self.maxReadingPerUID {
        guard let oldest = mine.min(by: { reading[$0].accepted < reading[$1].accepted }),
          reading[oldest].accepted + Self.evictAfter <= .now
        else {
          finish(client, busy)
          continue
        }
        finish(reading[oldest].fd, busy)
        reading.remove(at: oldest)
      }
      reading.append(first)
    }
  }

  /// Takes what a client has sent so far.
  private static func progress(_ r: inout Reading) -> Progress {
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
      let n = chunk.withUnsafeMutableBytes { recv(r.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
      if n < 0 && errno == EINTR { continue }
      if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return .more }
      guard n > 0 else { return .closed }
      if let nl = chunk[0..<n].firstIndex(of: 0x0A) {
        r.bytes += chunk[0..<nl]
        return r.bytes.count <= ControlRequest.maxLine ? .line(r.bytes) : .tooLong
      }
      r.bytes += chunk[0..<n]
      if r.bytes.count > ControlRequest.maxLine { return .tooLong }
    }
  }

  /// Decodes a whole request line and, if there is room, hands it to a thread that waits for
  /// the host's answer and sends it.
  private func dispatch(_ line: [UInt8], from r: Reading) {
    let request: ControlRequest
    switch ControlRequest.decode(line) {
    case .failure(let e):
      finish(r.fd, ControlResponse(pid: pid, stateDirectory: stateDirectory, outcome: .failed(e.failure)))
      return
    case .success(let decoded): request = decoded
    }
    guard admit(r.uid, status: request.verb == "status") else {
      finish(r.fd, busy)
      return
    }
    let started = DetachedThread.start { [self] in
      let answer = wait(for: request)
      ControlSocketIO.send(
        answer.line, to: r.fd, until: ControlSocketIO.deadline(in: ControlRequest.sendTimeout))
      Glibc.close(r.fd)
      release(r.uid)
    }
    if !started {
      release(r.uid)
      finish(r.fd, busy)
    }
  }

  /// Takes an in-flight slot for a client of `uid`; `status` may use the lane kept for it.
  private func admit(_ uid: UInt32, status: Bool) -> Bool {
    let extra = status ? Self.statusLane : 0
    return inFlight.withLock { counts in
      let total = counts.values.reduce(0, +)
      let mine = counts[uid, default: 0]
      guard total < Self.maxInFlight + extra, mine < Self.maxInFlightPerUID + extra else { return false }
      counts[uid] = mine + 1
      return true
    }
  }

  private func release(_ uid: UInt32) {
    inFlight.withLock { counts in
      let left = counts[uid, default: 1] - 1
      counts[uid] = left > 0 ? left : nil
    }
  }

  /// Answers a client from the reading thread, which must not wait: the answer is small and the
  /// connection new, so it fits the socket's buffer; whatever does not is dropped.
  private func finish(_ client: Int32, _ answer: ControlResponse) {
    let bytes = answer.line
    _ = bytes.withUnsafeBytes {
      Glibc.send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
    }
    Glibc.close(client)
  }
}
