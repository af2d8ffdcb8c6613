import ForsettiBridge
import Glibc
import Synchronization

/// A worker's own cgroup for as long as the worker lives: joined (or not, and why), what it saw
/// when the worker ended (an OOM kill), and its removal once the process is reaped.
final class WorkerCgroupHold: Sendable {
  /// Nil when the host has no cgroups.
  let cgroup: WorkerCgroup?
  /// What the cgroup said when the process was reaped ("killed by the kernel at its memory
  /// limit …"), for the crash report.
  private let verdict = Mutex<String?>(nil)
  private let placementFailure = Mutex<String?>(nil)

  init(_ cgroup: WorkerCgroup?) { self.cgroup = cgroup }

  /// Puts `pid` in the cgroup; why it could not be, if it could not (kept for `failure`).
  func join(_ pid: pid_t) -> String? {
    guard let cgroup else { return nil }
    do throws(CgroupError) {
      try cgroup.add(pid: pid)
      return nil
    } catch {
      return "could not put the worker in a cgroup of its own: \(error)"
    }
  }

  /// Why the worker could not be put in its cgroup, once said (`failed(_:)`).
  var failure: String? { placementFailure.withLock { $0 } }

  func failed(_ why: String) { placementFailure.withLock { $0 = why } }

  /// Reads what the cgroup saw (an OOM kill) and removes it, off the caller's thread: the
  /// kernel may take a moment to let go of a dead cgroup.
  func release() {
    guard let cgroup else { return }
    let facts = cgroup.facts()
    if facts.wasOOMKilled { verdict.withLock { $0 = facts.summary } }
    Self.release(cgroup)
  }

  /// Removes `cgroup` (killing anything left in it) on a thread of its own.
  static func release(_ cgroup: WorkerCgroup) {
    _ = DetachedThread.start { _ = try? cgroup.release() }
  }

  /// What the cgroup said of the worker's end, once reaped (an OOM kill); nil otherwise.
  var finding: String? { verdict.withLock { $0 } }
}
