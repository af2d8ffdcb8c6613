import CForsettiSys
import ForsettiBridge
import Glibc
import Synchronization

/// A child process the host started, until it is reaped: once reaped its pid may belong to
/// another process, so nothing signals it or changes its limits after that. Everything that
/// touches the pid does so under the lock reaping takes (`whileRunning`).
final class ChildProcess: Sendable {
  let pid: pid_t
  /// The wait status once the process has been reaped. Held while signalling and while reaping.
  private let reaped = Mutex<Int32?>(nil)
  /// Called once, under the lock, when the process is reaped (its cgroup is released then).
  private let onReaped: @Sendable () -> Void

  /// Seconds to wait for a killed process to be reaped before a background thread takes over
  /// (a process in uninterruptible sleep dies only when the kernel lets it).
  static let reapTimeout = 2.0

  init(pid: pid_t, onReaped: @escaping @Sendable () -> Void) {
    self.pid = pid
    self.onReaped = onReaped
  }

  /// `body` with the pid while the process is not reaped; nil once it is.
  func whileRunning<T>(_ body: (pid_t) -> T) -> T? {
    reaped.withLock { r in r == nil ? body(pid) : nil }
  }

  /// Sends SIGKILL unless the process was already reaped.
  func kill() { _ = whileRunning { Glibc.kill($0, SIGKILL) } }

  /// The wait status if the process has exited (reaping it), without waiting.
  func exitStatus() -> Int32? {
    reaped.withLock { r in
      if let r { return r }
      var status: Int32 = 0
      let got = waitpid(pid, &status, WNOHANG)
      if got == pid {
        r = status
        onReaped()
        return status
      }
      if got < 0 && errno == ECHILD {
        // Reaped by someone else: there is no status to give, and nothing left to signal.
        r = 0
        onReaped()
        return 0
      }
      return nil
    }
  }

  /// The wait status once the process exits, waiting at most `seconds`.
  func exitStatus(within seconds: Double) -> Int32? {
    let end = ContinuousClock.now + .wait(seconds)
    // Woken by the exit itself (a pidfd polls readable then), not by a timer: a stop or a
    // reload waits for the old worker to be gone. Opened only while the process is unreaped,
    // so the pid is still this worker's.
    let pidfd = whileRunning { forsetti_pidfd_open($0) } ?? -1
    defer { if pidfd >= 0 { close(pidfd) } }
    var pause: UInt32 = 100
    while true {
      if let s = exitStatus() { return s }
      let now = ContinuousClock.now
      if now >= end { return nil }
      if pidfd >= 0 {
        var p = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        _ = poll(&p, 1, Int32(clamping: WorkerEvents.nanoseconds(end - now) / 1_000_000 + 1))
      } else {
        usleep(pause)
        pause = min(pause * 2, 5000)
      }
    }
  }

  /// Ends the process and returns its wait status: waits up to `grace` seconds for it to exit
  /// by itself, then kills it and waits up to `reapTimeout`. Never blocks longer: a process the
  /// kernel does not let die in time is left to a background thread to reap (status nil).
  @discardableResult
  func end(grace: Double = 0) -> Int32? {
    if grace > 0, let s = exitStatus(within: grace) { return s }
    kill()
    if let s = exitStatus(within: Self.reapTimeout) { return s }
    _ = DetachedThread.start { [self] in
      // Waits without reaping, then reaps under the lock: `kill` never sees a reused pid.
      var info = siginfo_t()
      while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR {}
      _ = exitStatus()
    }
    return nil
  }
}
