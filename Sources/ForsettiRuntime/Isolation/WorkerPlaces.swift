import Dispatch
import ForsettiBridge
import Glibc
import Synchronization

/// Where a module's worker is to run, made before the worker exists: its sandbox directory (the
/// only place the worker may write, so the host makes it) with the `TMPDIR` in it, and a cgroup
/// of its own when the host has cgroups.
struct WorkerPlace: Sendable {
  /// Made for this module, not yet joined; nil without cgroups (or for a spare's, made earlier).
  var cgroup: WorkerCgroup?

  /// Makes the place of module `moduleID` (its cgroup only when `withCgroup`); why not, in the
  /// load step's words.
  static func make(
    moduleID: String, withCgroup: Bool, environment: HostEnvironment, settings: IsolationSettings
  ) -> Result<WorkerPlace, IsolatedStarter.NoWorker> {
    let sandbox = environment.sandboxPath(for: moduleID)
    // The worker may write only inside its sandbox, so the host creates it beforehand.
    do { _ = try SandboxStorage(root: sandbox) } catch {
      return .failure(.init(detail: error.description))
    }
    // The module's TMPDIR (`WorkerEnvironment`); a module that removed it may make it again.
    mkdir(sandbox + "/" + WorkerEnvironment.temporaryDirectory, 0o700)
    guard withCgroup, case .success(let cgroups) = HostCgroups.workerCgroups else { return .success(.init()) }
    do {
      return .success(
        .init(cgroup: try cgroups.create(moduleID: moduleID, limits: HostCgroups.limits(moduleID, settings))))
    } catch {
      return .failure(.init(detail: "could not make the worker a cgroup of its own: \(error)"))
    }
  }
}

/// The places of the modules of a large start, made in ID order on a thread of their own while
/// the main thread forks and configures the workers of the modules before them. Each place is
/// a handful of system calls (about 0.3 ms of a 1,000-module start's main thread per module
/// with cgroup v1's three hierarchies, measured in `scripts/bench --only scale`); made beside
/// the forks, they no longer lengthen the chain every start waits on.
final class WorkerPlaces: Sendable {
  private let made = Mutex<[Result<WorkerPlace, IsolatedStarter.NoWorker>]>([])
  /// Signalled once per place made; `take` waits once per place taken, in the same order.
  private let ready = DispatchSemaphore(value: 0)
  private let count: Int
  private let taken = Mutex(0)

  /// Starts making the places of `moduleIDs`, in order; nil when no thread can be had (the
  /// caller then makes each in turn).
  init?(moduleIDs: [String], environment: HostEnvironment, settings: IsolationSettings) {
    count = moduleIDs.count
    let started = DetachedThread.start { [self] in
      for id in moduleIDs {
        let place = WorkerPlace.make(
          moduleID: id, withCgroup: true, environment: environment, settings: settings)
        made.withLock { $0.append(place) }
        ready.signal()
      }
    }
    guard started else { return nil }
  }

  /// The next module's place, in the order given, once made.
  func next() -> Result<WorkerPlace, IsolatedStarter.NoWorker> {
    let index = taken.withLock { t in
      defer { t += 1 }
      return t
    }
    guard index < count else { return .failure(.init(detail: "no place was prepared for this module")) }
    ready.wait()
    return made.withLock { $0[index] }
  }
}
