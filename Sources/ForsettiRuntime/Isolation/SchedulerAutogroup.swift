/// Whether the kernel's autogroup shares the CPU per module where no cpu cgroup of ours does.
///
/// Every worker starts a session of its own (`setsid`), and with `kernel.sched_autogroup_enabled`
/// on, the scheduler gives each session's threads one entity: a module spinning 16 threads then
/// weighs as one module against its neighbours and the host, with no cgroup at all (an
/// unprivileged host, a v2 system that delegates no cpu controller). Autogroup applies only to
/// tasks in the root cpu group: inside any cpu cgroup (one systemd made for a slice, say) it does
/// nothing, and the threads of all modules compete one by one.
package enum SchedulerAutogroup {
  /// The kernel's switch.
  package static let switchFile = "/proc/sys/kernel/sched_autogroup_enabled"

  /// Whether autogroup groups this process's future workers: the switch on, and this process in
  /// the root cpu group of `hierarchy`.
  package static func applies(hierarchy: CgroupHierarchy, files: any CgroupFiles) -> Bool {
    guard let on = try? files.read(switchFile), on.split(whereSeparator: \.isWhitespace) == ["1"] else {
      return false
    }
    return inRootCPUGroup(hierarchy: hierarchy) { path in try? files.read(path) }
  }

  /// Whether a process placed as `hierarchy` says is scheduled in the root cpu group; `read`
  /// gives a cgroup interface file's text (nil when it cannot be read).
  static func inRootCPUGroup(hierarchy: CgroupHierarchy, read: (String) -> String?) -> Bool {
    switch hierarchy.controllers[.cpu] {
    case .found(let p):
      return isRoot(p)
    case .unavailable, nil:
      // No cpu hierarchy for this process. On v1 that is the root group; on v2 the controller may
      // still be on above it: the topmost cgroup below the root has `cpu` among its
      // controllers exactly when the root hands it down, and then every cgroup that has it
      // (the nearest is this process's group) is not the root group.
      let unified = hierarchy.controllers.values.compactMap { lookup -> CgroupPlacement? in
        if case .found(let p) = lookup, p.version == .v2 { return p }
        return nil
      }.first
      guard let v2 = unified else { return true }
      if isRoot(v2) { return true }
      let relative = v2.directory.dropFirst(v2.mountPoint.count).split(separator: "/")
      guard let top = relative.first else { return true }
      guard let controllers = read(CgroupHierarchy.join(v2.mountPoint, String(top) + "/cgroup.controllers"))
      else { return false }
      return !controllers.split(whereSeparator: \.isWhitespace).contains("cpu")
    }
  }

  private static func isRoot(_ p: CgroupPlacement) -> Bool {
    p.directory == p.mountPoint || p.directory + "/" == p.mountPoint
  }

  /// What the start line says about sharing the CPU without a cpu cgroup.
  package static func consequence(applies: Bool) -> String {
    applies
      ? "each module's threads share the CPU as one through the kernel's autogroup (a session per "
        + "worker), at equal weight"
      : "the threads of all modules compete for the CPU one by one, not per module"
  }
}
