import CForsettiSys
import ForsettiBridge
import FoundationEssentials
import Glibc
import Synchronization

/// A worker process just started, and the host's ends of its channels: fd 3, a socket for
/// lifecycle, logs and deliveries; fd 4, the shared-memory ring of the module's synchronous
/// calls; its standard output and error as one pipe. Every worker starts with
/// `--await-config`: it knows no module, has confined nothing and loaded nothing until the host
/// sends it a `configure` frame (`WorkerProcess`).
final class StartedWorker: Sendable {
  let pid: pid_t
  let socket: WireSocket
  let calls: CallRing
  let outputFD: Int32
  /// Set once the process has been waited for: its pid may then belong to another process.
  private let reaped = Atomic<Bool>(false)

  init(pid: pid_t, socket: WireSocket, calls: CallRing, outputFD: Int32) {
    self.pid = pid
    self.socket = socket
    self.calls = calls
    self.outputFD = outputFD
  }

  /// The three channels of a worker about to start, both ends: the host keeps `socket`,
  /// `calls` and `outputFD`; the worker gets `workerSocket` (fd 3), `ringFD` (fd 4) and
  /// `outputWrite` (fds 1 and 2), each at 5 or above and close-on-exec.
  struct Channels {
    let socket: WireSocket
    let calls: CallRing
    let outputFD: Int32
    let workerSocket: Int32
    let ringFD: Int32
    let outputWrite: Int32

    static func make() throws(WorkerProcess.SpawnError) -> Channels {
      guard let (host, worker) = WireSocket.pair() else { throw .socket(errno) }
      guard let (ring, createdRingFD) = CallRing.create() else {
        let e = errno
        close(host.fd)
        close(worker.fd)
        throw .ring(e)
      }
      var out: [Int32] = [0, 0]
      // Close-on-exec from the start: a spare worker may be spawned on another thread meanwhile,
      // and must not inherit this worker's output pipe (it could write into this module's log).
      guard forsetti_pipe_cloexec(&out) == 0 else {
        let e = errno
        close(host.fd)
        close(worker.fd)
        close(createdRingFD)
        ring.close()
        throw .pipe(e)
      }
      // The child fills 0–4 in turn; a channel sitting at one of those numbers (a host started
      // with a standard stream closed, say) would be overwritten before its own turn.
      let workerFD = aboveChannels(worker.fd)
      let ringFD = aboveChannels(createdRingFD)
      let write = aboveChannels(out[1])
      guard workerFD >= 0, ringFD >= 0, write >= 0 else {
        let e = errno
        for fd in [host.fd, workerFD, ringFD, out[0], write] where fd >= 0 { close(fd) }
        ring.close()
        throw .pipe(e)
      }
      return Channels(
        socket: host, calls: ring, outputFD: out[0], workerSocket: workerFD, ringFD: ringFD,
        outputWrite: write)
    }

    /// Closes the worker's ends, once the worker holds its own copies (or will never start).
    func closeWorkerEnds() {
      close(workerSocket)
      close(ringFD)
      close(outputWrite)
    }

    /// Closes the host's ends of a worker that never started.
    func closeHostEnds() {
      close(socket.fd)
      close(outputFD)
      calls.close()
    }

    /// `fd`, moved to 5 or above (close-on-exec) if it is below; -1 if it cannot be.
    private static func aboveChannels(_ fd: Int32) -> Int32 {
      guard fd < 5 else { return fd }
      let moved = fcntl(fd, F_DUPFD_CLOEXEC, 5)
      close(fd)
      return moved
    }
  }

  /// A worker forked by `zygote`, waiting for its configuration; nil (and nothing left open)
  /// when the zygote could not fork one, with the zygote's reason.
  static func fork(from zygote: Zygote) throws(Zygote.ForkError) -> StartedWorker {
    let c: Channels
    do { c = try Channels.make() } catch { throw .channels(error) }
    let pid: pid_t
    do throws(Zygote.ForkError) {
      pid = try zygote.fork(socket: c.workerSocket, ring: c.ringFD, output: c.outputWrite)
    } catch {
      c.closeWorkerEnds()
      c.closeHostEnds()
      throw error
    }
    c.closeWorkerEnds()
    return StartedWorker(pid: pid, socket: c.socket, calls: c.calls, outputFD: c.outputFD)
  }

  /// Starts the worker `executable`, waiting for its configuration (posix_spawn, never fork:
  /// the host may be large and threaded).
  static func spawn(executable: String) throws(WorkerProcess.SpawnError) -> StartedWorker {
    let c = try Channels.make()
    do {
      let pid = try spawnProcess(
        executable: executable, arguments: ["--await-config"],
        channels: [
          (c.outputWrite, 1), (c.outputWrite, 2), (c.workerSocket, WorkerMain.socketFD),
          (c.ringFD, WorkerMain.callsFD),
        ])
      c.closeWorkerEnds()
      return StartedWorker(pid: pid, socket: c.socket, calls: c.calls, outputFD: c.outputFD)
    } catch {
      c.closeWorkerEnds()
      c.closeHostEnds()
      throw error
    }
  }

  /// posix_spawn of `executable` with /dev/null on 0, each of `channels` (descriptor, number)
  /// at its number and nothing else open, in a process group of its own, with the base
  /// environment of every worker (`WorkerEnvironment.base`). Shared by workers and the zygote.
  static func spawnProcess(executable: String, arguments: [String], channels: [(Int32, Int32)])
    throws(WorkerProcess.SpawnError) -> pid_t
  {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    for (fd, number) in channels { posix_spawn_file_actions_adddup2(&actions, fd, number) }
    // Nothing else crosses into the confined process: not a descriptor some library of the host
    // left inheritable, nor one the host itself inherited (a test runner's socket, say).
    let highest = channels.map(\.1).max() ?? 2
    let closed = forsetti_spawn_close_from(&actions, highest + 1)
    guard closed == 0 else { throw .spawn(closed) }
    var argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
    defer { for a in argv { free(a) } }
    // Chosen, never inherited (`WorkerEnvironment`): what the host was given is not a module's.
    let envStrings = WorkerEnvironment.spawnStrings(host: ProcessInfo.processInfo.environment)
    var envp: [UnsafeMutablePointer<CChar>?] = envStrings.map { strdup($0) } + [nil]
    defer { for e in envp { free(e) } }
    // Each worker gets a session (and so a process group) of its own: a Ctrl-C at the terminal
    // (sent to the host's whole foreground group) reaches only the host, which then stops its
    // modules in order (the workers die with the host anyway: parent-death signal); and where no
    // cpu cgroup holds the worker, the kernel's autogroup makes a module's threads one
    // scheduling entity per session.
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    posix_spawnattr_setflags(&attributes, forsetti_spawn_flag_setsid())
    _ = forsetti_spawn_clear_sigmask(&attributes)
    var child: pid_t = 0
    let rc = posix_spawn(&child, executable, &actions, &attributes, &argv, &envp)
    guard rc == 0 else { throw .spawn(rc) }
    return child
  }

  /// Whether the process is still running (one that has exited is reaped here).
  var isRunning: Bool {
    guard !reaped.load(ordering: .acquiring) else { return false }
    var status: Int32 = 0
    let r = waitpid(pid, &status, WNOHANG)
    if r == pid { reaped.store(true, ordering: .releasing) }
    return r == 0
  }

  /// Ends a worker that will serve no module: kills and reaps it and closes the host's ends.
  /// Waits at most `ChildProcess.reapTimeout` for it to die (a process in uninterruptible sleep
  /// dies only when the kernel lets it); a thread of its own reaps it after that.
  func discard() {
    if !reaped.exchange(true, ordering: .acquiringAndReleasing) {
      kill(pid, SIGKILL)
      let end = ContinuousClock.now + .wait(ChildProcess.reapTimeout)
      var status: Int32 = 0
      var gone = false
      while !gone && ContinuousClock.now < end {
        let r = waitpid(pid, &status, WNOHANG)
        gone = r == pid || (r < 0 && errno != EINTR)
        if !gone { usleep(1000) }
      }
      if !gone {
        _ = DetachedThread.start { [pid] in
          var status: Int32 = 0
          while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
      }
    }
    calls.close()
    close(socket.fd)
    close(outputFD)
  }
}
