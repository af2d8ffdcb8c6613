import Glibc

/// Why the host cannot give its workers a cgroup, or why an operation on one failed, in words an
/// operator can act on.
package enum CgroupError: Error, Sendable, Equatable, CustomStringConvertible {
  /// Neither a v1 hierarchy with the controller nor a cgroup2 filesystem is mounted.
  case notMounted(CgroupController)
  /// The controller belongs to a v1 hierarchy (the host's cgroup `path` in it) not mounted here.
  case boundButNotMounted(CgroupController, path: String)
  /// The host's cgroup `path` is outside every mount of its hierarchy.
  case notVisible(CgroupController, path: String, mounts: String)
  /// cgroup v2: the host's cgroup does not offer the controller to its children.
  case notDelegated(CgroupController, directory: String, available: String)
  /// The host may not create or write there (EACCES, EPERM).
  case notWritable(CgroupController, directory: String, owner: UInt32?, code: Int32)
  /// The cgroup filesystem is mounted read-only.
  case readOnly(CgroupController, directory: String)
  /// cgroup v2: enabling the controller in `cgroup.subtree_control` failed.
  case cannotEnable(CgroupController, directory: String, code: Int32)
  /// cgroup v2: the host's cgroup has processes, and moving one into a leaf of its own failed.
  case hostNotMovable(directory: String, pid: Int32, code: Int32)
  /// cgroup v2: the host's cgroup has processes that are not the host's (`name` is one's command).
  case sharedCgroup(directory: String, pid: Int32, name: String)
  /// A worker's cgroup still had tasks or could not be removed after they were killed.
  case stillBusy(directory: String, pids: [Int32])
  /// The cgroup was released already.
  case released(directory: String)
  /// Any other failed file operation, with its errno.
  case file(CgroupFileError)

  package var description: String {
    switch self {
    case .notMounted(let c):
      return
        "no \(c) cgroup: no cgroup v1 hierarchy has the \(c) controller and no cgroup2 filesystem is mounted"
    case .boundButNotMounted(let c, let path):
      return "no \(c) cgroup: the \(c) controller belongs to a cgroup v1 hierarchy (host's cgroup \(path)) "
        + "that is not mounted in this mount namespace"
    case .notVisible(let c, let path, let mounts):
      return "no \(c) cgroup: the host's cgroup \(path) is not visible under \(mounts) "
        + "(a container that mounted only part of the tree?)"
    case .notDelegated(let c, let directory, let available):
      let listed = available.isEmpty ? "nothing" : "only '\(available)'"
      return "no \(c) cgroup: \(directory)/cgroup.controllers lists \(listed), so its children cannot "
        + "have the \(c) controller (under systemd: Delegate=yes in the unit)"
    case .notWritable(let c, let directory, let owner, let code):
      let who = owner.map { $0 == 0 ? "root" : "uid \($0)" } ?? "another user"
      return "no writable \(c) cgroup: \(directory) is owned by \(who) (\(Self.text(code))); "
        + "run as root or under systemd with Delegate=yes"
    case .readOnly(let c, let directory):
      return "no writable \(c) cgroup: \(directory) is on a read-only cgroup filesystem "
        + "(a container started without write access to /sys/fs/cgroup?)"
    case .cannotEnable(let c, let directory, let code):
      return
        "no \(c) cgroup: enabling \(c) in \(directory)/cgroup.subtree_control failed (\(Self.text(code)))"
    case .hostNotMovable(let directory, let pid, let code):
      return "no cgroup: \(directory) holds processes, and cgroup v2 enables controllers only for the "
        + "children of a cgroup without any; moving pid \(pid) into a leaf of its own failed "
        + "(\(Self.text(code))); give the host a cgroup of its own (systemd: Delegate=yes)"
    case .sharedCgroup(let directory, let pid, let name):
      return "no cgroup: \(directory) also holds pid \(pid) (\(name)), which the host did not start, and "
        + "cgroup v2 enables controllers only for the children of a cgroup without processes; run the "
        + "host in a cgroup of its own (systemd-run --scope -p Delegate=yes …, or a service with Delegate=yes)"
    case .stillBusy(let directory, let pids):
      let listed = pids.map(String.init).joined(separator: " ")
      return "cgroup \(directory) could not be removed"
        + (pids.isEmpty ? "" : " (tasks still inside: \(listed))")
    case .released(let directory):
      return "cgroup \(directory) was released already"
    case .file(let e):
      return "cgroup: \(e)"
    }
  }

  private static func text(_ code: Int32) -> String { String(cString: strerror(code)) }

  /// The error for a failed creation or write in `directory`, by its errno.
  static func refused(
    _ controller: CgroupController, _ directory: String, _ e: CgroupFileError, files: any CgroupFiles
  ) -> CgroupError {
    switch e.code {
    case EACCES, EPERM:
      .notWritable(controller, directory: directory, owner: files.owner(directory), code: e.code)
    case EROFS: .readOnly(controller, directory: directory)
    default: .file(e)
    }
  }
}
