/// The cgroups of this host's workers: prepared once per process, since the host's own cgroup
/// (and on v2 the leaf it moves itself into) belongs to the process, not to one manager.
package enum HostCgroups {
  /// Where workers get their cgroups, or why they cannot (said once at start).
  static let workerCgroups: Result<WorkerCgroups, CgroupError> = Result {
    () throws(CgroupError) -> WorkerCgroups in try WorkerCgroups.prepare()
  }

  /// Tasks (threads) one worker may have (`WorkerCgroup.Limits.defaultTasks`).
  static let workerTasks = WorkerCgroup.Limits.defaultTasks

  /// One line for the start of `run`: the workers' cgroups, or why there are none and what
  /// that costs (`--memory-limit` is then an address-space limit, and memfds are refused).
  package static var support: String { support(cpu: CPUShares()) }

  /// The start line with the CPU shares in force (`--cpu-weight`, `--cpu-max`) where the cpu
  /// controller is had.
  package static func support(cpu: CPUShares) -> String {
    switch workerCgroups {
    case .success(let c):
      let shares = c.hasCPU ? ", \(cpu.summary)" : ""
      return ([c.summary + " (memory limit = --memory-limit, \(workerTasks) tasks\(shares))"] + c.notes)
        .joined(separator: "; ")
    case .failure(let e):
      let files = KernelCgroupFiles()
      let autogroup = (try? CgroupHierarchy.current(files: files)).map {
        SchedulerAutogroup.applies(hierarchy: $0, files: files)
      }
      return
        "NO cgroup for workers: \(e); --memory-limit holds address space only, and workers are refused "
        + "memfd_create; no cpu controller either: \(SchedulerAutogroup.consequence(applies: autogroup ?? false)) "
        + "(--cpu-weight and --cpu-max are not applied)"
    }
  }

  /// What the cgroup of a worker of `moduleID` holds it to.
  static func limits(_ moduleID: String, _ settings: IsolationSettings) -> WorkerCgroup.Limits {
    .init(
      memoryBytes: settings.limits.memoryBytes, tasks: workerTasks,
      cpuWeight: settings.cpu.weight(for: moduleID),
      cpuMaxPercent: settings.cpu.maxPercent(for: moduleID))
  }

  /// A cgroup of its own for the spare worker `pid`, with every worker's limits, and the spare
  /// in it; nil without cgroups or when that fails (the worker is then placed when it is given
  /// its module, as any other).
  static func placeSpare(_ pid: Int32, _ settings: IsolationSettings) -> WorkerCgroup? {
    guard case .success(let cgroups) = workerCgroups,
      let cgroup = try? cgroups.create(moduleID: "spare", limits: limits("spare", settings))
    else { return nil }
    do throws(CgroupError) {
      try cgroup.add(pid: pid)
      return cgroup
    } catch {
      WorkerCgroupHold.release(cgroup)
      return nil
    }
  }
}
