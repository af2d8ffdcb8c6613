import ForsettiBridge
import Glibc
import Synchronization

/// Where new worker processes come from: forked by the zygote (`Zygote`), or spawned one by one
/// when there is none (`IsolationSettings.zygote` off, or a zygote that cannot fork here). Either
/// way the worker starts knowing no module and awaits its configuration (`StartedWorker`).
final class WorkerSource: Sendable {
  let executable: String
  let forks: Bool
  private let state = Mutex<State>(.notStarted(failures: 0))

  private enum State {
    case notStarted(failures: Int)
    case running(Zygote, failures: Int)
    /// Why workers are spawned instead (said by `zygoteUnavailable`).
    case unavailable(String)
    case shutDown
  }

  /// A zygote that ends this many times is not started again.
  static let zygoteRestarts = 3

  init(executable: String, forks: Bool) {
    self.executable = executable
    self.forks = forks
  }

  /// Starts the zygote ahead of the first worker, so its start overlaps the host's own work
  /// (nothing waits for it here). Call it on the thread that starts workers.
  func prepare() { _ = zygote() }

  /// A new worker awaiting its configuration.
  func start() throws(WorkerProcess.SpawnError) -> StartedWorker {
    // A zygote found gone is replaced at once (once per worker): the next try forks from the new one.
    for _ in 0..<2 {
      guard let z = zygote() else { break }
      do throws(Zygote.ForkError) {
        return try StartedWorker.fork(from: z)
      } catch {
        switch error {
        case .channels(let e): throw e
        case .fork:
          // This one fork failed (out of processes, say): a spawn may still succeed.
          return try StartedWorker.spawn(executable: executable)
        case .unsupported, .gone:
          lost(z, error)
        }
      }
    }
    return try StartedWorker.spawn(executable: executable)
  }

  /// Why workers are not forked from a zygote, if they are not.
  var zygoteUnavailable: String? {
    state.withLock { s in
      guard forks else { return "turned off" }
      if case .unavailable(let why) = s { return why }
      return nil
    }
  }

  /// The zygote's pid while one runs (for tests and `status`).
  var zygotePID: pid_t? {
    state.withLock { s -> pid_t? in
      guard case .running(let z, _) = s else { return nil }
      return z.pid
    }
  }

  /// Ends the zygote; workers are spawned from now on.
  func shutdown() { end(then: .shutDown) }

  /// Ends the zygote while nothing needs one (every module stopped); the next worker starts a
  /// new one.
  func release() {
    let failures = state.withLock { s -> Int? in
      if case .running(_, let f) = s { return f }
      return nil
    }
    guard let failures else { return }
    end(then: .notStarted(failures: failures))
  }

  private func end(then next: State) {
    let z = state.withLock { s -> Zygote? in
      guard case .running(let z, _) = s else {
        if case .shutDown = next { s = next }
        return nil
      }
      s = next
      return z
    }
    z?.shutdown()
  }

  private func zygote() -> Zygote? {
    guard forks else { return nil }
    return state.withLock { s -> Zygote? in
      switch s {
      case .running(let z, _): return z
      case .unavailable, .shutDown: return nil
      case .notStarted(let failures):
        do throws(WorkerProcess.SpawnError) {
          let z = try Zygote.start(executable: executable)
          s = .running(z, failures: failures)
          return z
        } catch {
          s = .unavailable("the zygote could not be started: \(error)")
          return nil
        }
      }
    }
  }

  private func lost(_ z: Zygote, _ error: Zygote.ForkError) {
    z.shutdown()
    state.withLock { s in
      guard case .running(let current, let failures) = s, current === z else { return }
      if case .unsupported = error {
        s = .unavailable(error.description)
      } else if failures + 1 >= Self.zygoteRestarts {
        s = .unavailable("\(error) (\(failures + 1) times)")
      } else {
        s = .notStarted(failures: failures + 1)
      }
    }
  }
}
