import ForsettiBridge
import Glibc
import Synchronization

/// Where new worker processes come from: forked by the zygote (`Zygote`), or spawned one by one
/// when there is none (`IsolationSettings.zygote` off, or a zygote that cannot fork here). Either
/// way the worker starts knowing no module and awaits its configuration (`StartedWorker`).
///
/// The zygote is supervised here. A fork it does not answer within `Zygote.forkTimeout` (a
/// zygote stopped, say), or a zygote found gone, costs that zygote: it is killed and replaced,
/// and the start is tried once more through the new one, else spawned. After
/// `zygoteRestarts` losses workers are spawned from then on. Each replacement and each fall
/// back to posix_spawn is one line of the host's log (`log`).
final class WorkerSource: Sendable {
  let executable: String
  let forks: Bool
  private let log: @Sendable (String) -> Void
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

  /// `log` receives the host's lines about its zygote (a replacement, a fall back to spawning).
  init(executable: String, forks: Bool, log: @escaping @Sendable (String) -> Void = { _ in }) {
    self.executable = executable
    self.forks = forks
    self.log = log
  }

  /// Starts the zygote ahead of the first worker, so its start overlaps the host's own work
  /// (nothing waits for it here). Call it on the thread that starts workers.
  func prepare() { _ = zygote() }

  /// A new worker awaiting its configuration.
  func start() throws(WorkerProcess.SpawnError) -> StartedWorker {
    // What happened to the zygote last tried, said once the next one is known.
    var lostOne: String?
    for _ in 0..<2 {
      guard let z = zygote() else { break }
      let forked: Result<StartedWorker, Zygote.ForkError>
      do throws(Zygote.ForkError) { forked = .success(try StartedWorker.fork(from: z)) } catch {
        forked = .failure(error)
      }
      // Said now: the replacement's pid is known once it greeted, at its first fork.
      if let lostOne { log("\(lostOne): replaced by \(z.name)") }
      lostOne = nil
      switch forked {
      case .success(let worker): return worker
      case .failure(.channels(let e)): throw e
      case .failure(let error) where error.isForkOnly:
        // This one fork failed (out of processes, say): a spawn may still succeed.
        log("\(z.name) could not fork a worker (\(error)): this one is spawned (posix_spawn)")
        return try StartedWorker.spawn(executable: executable)
      case .failure(let error):
        let name = z.name
        if let gaveUp = lost(z, error) {
          log("\(name) \(error.detail): \(gaveUp); workers are spawned from now on (posix_spawn)")
          return try StartedWorker.spawn(executable: executable)
        }
        lostOne = "\(name) \(error.detail)"
      }
    }
    if let lostOne {
      log("\(lostOne): this worker is spawned (posix_spawn)")
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
    let (z, failed) = state.withLock { s -> (Zygote?, String?) in
      switch s {
      case .running(let z, _): return (z, nil)
      case .unavailable, .shutDown: return (nil, nil)
      case .notStarted(let failures):
        do throws(WorkerProcess.SpawnError) {
          let z = try Zygote.start(executable: executable)
          s = .running(z, failures: failures)
          return (z, nil)
        } catch {
          s = .unavailable("the zygote could not be started: \(error)")
          return (nil, "\(error)")
        }
      }
    }
    if let failed { log("the zygote could not be started (\(failed)): workers are spawned (posix_spawn)") }
    return z
  }

  /// Ends `z` after `error`: nil when a new zygote is to replace it, else why none will.
  private func lost(_ z: Zygote, _ error: Zygote.ForkError) -> String? {
    z.shutdown()
    return state.withLock { s -> String? in
      guard case .running(let current, let failures) = s, current === z else { return nil }
      if case .unsupported = error {
        s = .unavailable(error.description)
        return "not replaced, it cannot fork here"
      } else if failures + 1 >= Self.zygoteRestarts {
        s = .unavailable("\(error) (\(failures + 1) times)")
        return "not replaced, \(failures + 1) zygotes were lost"
      } else {
        s = .notStarted(failures: failures + 1)
        return nil
      }
    }
  }
}
