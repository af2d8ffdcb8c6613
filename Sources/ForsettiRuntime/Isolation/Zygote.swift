import CForsettiSys
import ForsettiBridge
import Glibc
import Synchronization

/// The host's handle on the worker zygote (`forsetti-worker --zygote`, `ZygoteMain.swift`): one
/// process, started once, that forks a worker per module instead of the host spawning each.
/// A forked worker is the host's own child (the zygote forks with CLONE_PARENT), so it is
/// waited for, signalled, put in its cgroup and judged exactly as a spawned one; it awaits its
/// configuration, confines itself and loads its module as a spawned worker does.
///
/// When the zygote cannot fork (it ended, or this libc is not one it knows how to fork under),
/// `fork` throws and the caller spawns the worker instead: a zygote makes workers cheaper, never
/// possible.
final class Zygote: Sendable {
  /// The process spawned; it hands over to the zygote proper (its copy, also the host's child)
  /// and ends, and is reaped when the zygote greets.
  private let spawned: pid_t
  private let control: Int32
  /// Requests and replies are paired one at a time; the first reply (ready or not) is read with
  /// the first request, so starting the zygote never waits for it.
  private let turn = Mutex<State>(State())
  private let reaped = Atomic<Bool>(false)

  private struct State {
    /// The zygote proper, once it greeted.
    var pid: pid_t?
    var spawnedReaped = false
    var broken: ForkError?
  }

  /// The zygote's pid, once it has greeted (for tests and `status`).
  var pid: pid_t? { turn.withLock { $0.pid } }

  /// Seconds the zygote has to greet: its own start-up (posix_spawn, exec, the Swift runtime),
  /// waited for at the first fork only.
  static let greetingTimeout = 5.0
  /// Seconds the zygote has to answer a fork with a pid. A fork takes a millisecond or so; a
  /// zygote slower than this is stuck (stopped, say) and is replaced (`WorkerSource`). This is
  /// the zygote's deadline, not the module's: the module's start timeout runs from when its
  /// worker exists.
  static let forkTimeout = 1.0

  /// How the host names this zygote in its log: its pid once it greeted, else the process spawned.
  var name: String { "zygote pid \(pid ?? spawned)" }

  enum ForkError: Error, CustomStringConvertible, Equatable {
    case channels(WorkerProcess.SpawnError)
    /// The zygote said it cannot fork here (-errno).
    case unsupported(Int32)
    /// The zygote could not fork this worker (-errno).
    case fork(Int32)
    /// The zygote ended or broke its protocol; `detail` says how.
    case gone(String)

    var description: String {
      switch self {
      case .channels(let e): "the worker's channels: \(e)"
      case .unsupported(let e): "the zygote cannot fork under this C library: \(String(cString: strerror(e)))"
      case .fork(let e): "the zygote's fork: \(String(cString: strerror(e)))"
      case .gone(let detail): "the zygote \(detail)"
      }
    }

    /// Only this one fork failed; the zygote itself is fine.
    var isForkOnly: Bool { if case .fork = self { true } else { false } }

    /// What happened, after the zygote's name ("did not answer within 1.0 s", "ended").
    var detail: String {
      switch self {
      case .gone(let detail): detail
      case .unsupported(let e): "cannot fork under this C library (\(String(cString: strerror(e))))"
      default: description
      }
    }

    static func == (a: ForkError, b: ForkError) -> Bool { a.description == b.description }
  }

  private init(spawned: pid_t, control: Int32) {
    self.spawned = spawned
    self.control = control
  }

  /// Spawns the zygote from the worker `executable`. Like every worker it belongs to the thread
  /// that spawns it (parent-death signal), and so do the workers it forks: start it on the
  /// thread that would otherwise spawn them (the host's main thread).
  static func start(executable: String) throws(WorkerProcess.SpawnError) -> Zygote {
    var pair: [Int32] = [0, 0]
    guard socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0
    else { throw .socket(errno) }
    let zygoteEnd = fcntl(pair[1], F_DUPFD_CLOEXEC, 5)
    close(pair[1])
    guard zygoteEnd >= 0 else {
      let e = errno
      close(pair[0])
      throw .socket(e)
    }
    defer { close(zygoteEnd) }
    do {
      let pid = try StartedWorker.spawnProcess(
        executable: executable, arguments: ["--zygote"],
        channels: [(zygoteEnd, ZygoteMain.controlFD)])
      return Zygote(spawned: pid, control: pair[0])
    } catch {
      close(pair[0])
      throw error
    }
  }

  /// Forks a worker holding `socket` (its fd 3), `ring` (fd 4) and `output` (fds 1 and 2): its
  /// pid. The caller still owns and closes the three descriptors.
  func fork(socket: Int32, ring: Int32, output: Int32) throws(ForkError) -> pid_t {
    let outcome: Result<pid_t, ForkError> = turn.withLock { state in
      if let broken = state.broken { return .failure(broken) }
      if state.pid == nil {
        if let e = greet(&state) {
          state.broken = e
          return .failure(e)
        }
      }
      let fds = [socket, ring, output]
      let sent = fds.withUnsafeBufferPointer { p in
        "fork".withCString { forsetti_send_with_fds(control, $0, 4, p.baseAddress, 3) }
      }
      guard sent == 4 else {
        // Its end of the socket closed: it ended (killed, say) since the last fork.
        let ended = errno == EPIPE || errno == ECONNRESET
        let e = ForkError.gone(
          ended ? "had ended" : "could not be asked: \(String(cString: strerror(errno)))")
        state.broken = e
        return .failure(e)
      }
      switch readReply(within: Self.forkTimeout) {
      case .failure(let e):
        state.broken = e
        return .failure(e)
      case .success(let v) where v < 0: return .failure(.fork(Int32(clamping: -v)))
      case .success(let v):
        guard let pid = pid_t(exactly: v), pid > 0 else {
          let e = ForkError.gone("answered with no pid (\(v))")
          state.broken = e
          return .failure(e)
        }
        return .success(pid)
      }
    }
    let pid = try outcome.get()
    // Only a child of this host may be treated as a worker: signalled, waited for, put in a
    // cgroup. A pid that is not ours means the zygote is not ours either.
    var info = siginfo_t()
    guard waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 else {
      let e = ForkError.gone("answered with pid \(pid), which is not a child of this host")
      turn.withLock { $0.broken = e }
      throw e
    }
    return pid
  }

  /// Reads the zygote's greeting and reaps the process spawned: nil once `state.pid` is set.
  private func greet(_ state: inout State) -> ForkError? {
    let greeting = readReply(within: Self.greetingTimeout)
    // The process spawned ends once it has handed over (or failed to).
    if case .success = greeting {
      var status: Int32 = 0
      while waitpid(spawned, &status, 0) < 0 && errno == EINTR {}
      state.spawnedReaped = true
    }
    switch greeting {
    case .failure(let e): return e
    case .success(let v) where v < 0: return .unsupported(Int32(clamping: -v))
    case .success(let v):
      var info = siginfo_t()
      guard let pid = pid_t(exactly: v), pid > 0,
        waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0
      else { return .gone("greeted with pid \(v), which is not a child of this host") }
      state.pid = pid
      return nil
    }
  }

  /// One Int64 reply, waiting at most `seconds` (a signal does not extend the wait).
  private func readReply(within seconds: Double) -> Result<Int64, ForkError> {
    var poll = pollfd(fd: control, events: Int16(POLLIN), revents: 0)
    let end = ContinuousClock.now + .wait(seconds)
    var ready: Int32
    repeat {
      let left = WorkerEvents.nanoseconds(end - .now) / 1_000_000
      ready = Glibc.poll(&poll, 1, Int32(clamping: left))
    } while ready < 0 && errno == EINTR
    guard ready > 0 else { return .failure(.gone("did not answer within \(seconds) s")) }
    var value: Int64 = 0
    let n = withUnsafeMutableBytes(of: &value) { recv(control, $0.baseAddress, $0.count, Int32(MSG_TRUNC)) }
    guard n == MemoryLayout<Int64>.size else {
      return .failure(.gone(n == 0 ? "ended" : "sent a malformed reply (\(n) bytes)"))
    }
    return .success(Int64(littleEndian: value))
  }

  /// Ends the zygote (its workers are the host's and live on) and reaps it.
  func shutdown() {
    guard !reaped.exchange(true, ordering: .acquiringAndReleasing) else { return }
    // A zygote that forked nothing has not been greeted: its pid is learnt now, so it is reaped
    // too (a host handing over to a new image would otherwise leave it a zombie the new image
    // does not know of).
    let (pid, spawnedReaped) = turn.withLock { state in
      if state.pid == nil && state.broken == nil { _ = greet(&state) }
      return (state.pid, state.spawnedReaped)
    }
    close(control)
    // Each ends when the control socket closes; SIGKILL in case one is stuck.
    for p in [pid, spawnedReaped ? nil : spawned].compactMap({ $0 }) {
      kill(p, SIGKILL)
      var status: Int32 = 0
      while waitpid(p, &status, 0) < 0 && errno == EINTR {}
    }
  }
}
