import Glibc
import Synchronization

/// The cgroups of one host's workers: `forsetti-<hostpid>` beneath the host's own cgroup in each
/// hierarchy used (one for cgroup v2; one per controller, or per group of co-mounted controllers,
/// for v1), prepared once at start, and one child `<module>-<n>` per worker. memory and pids are
/// required; cpu is used where it can be had.
package final class WorkerCgroups: Sendable {
  /// One hierarchy the workers' cgroups live in.
  struct Site: Sendable, Equatable {
    var version: CgroupPlacement.Version
    /// The host's own cgroup.
    var hostDirectory: String
    /// `forsetti-<hostpid>` in it.
    var parent: String
    var controllers: [CgroupController]
    /// Where the host's process was before it joined `forsetti-<hostpid>/forsetti-host` (the cpu
    /// site only), to go back to at `close`.
    var hostHome: String? = nil

    /// The controller named in an error about the whole site (every site carries at least one).
    var lead: CgroupController { controllers.first ?? .memory }
  }

  let sites: [Site]
  let files: any CgroupFiles
  let hostPID: Int32
  /// Swap is on and the memory controller cannot count it: v1 then forbids it by swappiness.
  let swapUncounted: Bool
  /// What preparing did that an operator may want to know (stale cgroups removed, the host
  /// moved into a leaf, swap not counted); the host prints them once at start.
  package let notes: [String]
  private let made = Atomic<Int>(0)

  /// The name prefix of a host's parent cgroup; the pid follows.
  static let prefix = "forsetti-"
  /// cgroup v2: the leaf the host's own processes move to when its cgroup must have none.
  package static let hostLeaf = "forsetti-host"

  private init(sites: [Site], files: any CgroupFiles, hostPID: Int32, swapUncounted: Bool, notes: [String]) {
    self.sites = sites
    self.files = files
    self.hostPID = hostPID
    self.swapUncounted = swapUncounted
    self.notes = notes
  }

  /// Finds where memory and pids (and cpu) live, removes what hosts that died left behind, and
  /// makes `forsetti-<hostpid>` with the controllers available to its children; the error says in
  /// plain words why the host cannot (print it once, then run workers without cgroups). The cpu
  /// controller is optional: where it cannot be had, a note says why and workers get memory and
  /// pids as before.
  package static func prepare(files: any CgroupFiles = KernelCgroupFiles(), hostPID: Int32 = getpid())
    throws(CgroupError) -> WorkerCgroups
  {
    let hierarchy = try CgroupHierarchy.current(files: files)
    let autogroup = SchedulerAutogroup.applies(hierarchy: hierarchy, files: files)
    var sites: [Site] = []
    var notes: [String] = []
    for controller in CgroupController.allCases {
      var p: CgroupPlacement
      do {
        p = try hierarchy.placement(controller)
      } catch {
        guard controller.isOptional else { throw error }
        notes.append(without(controller, error, autogroup: autogroup))
        continue
      }
      // A host that moved itself into a leaf earlier (a second preparation) still owns the
      // cgroup above it: workers go beside the leaf, never beneath it. The cpu leaf is inside
      // the host's own parent (`forsetti-<hostpid>/forsetti-host`); the v2 one beside it.
      let ownCPULeaf = "/" + prefix + String(hostPID) + "/" + hostLeaf
      if p.directory.hasSuffix(ownCPULeaf) {
        p.directory = String(p.directory.dropLast(ownCPULeaf.count))
      } else if p.version == .v2, p.directory.hasSuffix("/" + hostLeaf) {
        p.directory = String(p.directory.dropLast(hostLeaf.count + 1))
      }
      if let i = sites.firstIndex(where: { $0.hostDirectory == p.directory && $0.version == p.version }) {
        sites[i].controllers.append(controller)
      } else {
        let parent = CgroupHierarchy.join(p.directory, prefix + String(hostPID))
        sites.append(
          Site(version: p.version, hostDirectory: p.directory, parent: parent, controllers: [controller]))
      }
    }
    var prepared: [Site] = []
    for var site in sites {
      do throws(CgroupError) {
        if try prepare(&site, hostPID: hostPID, files: files, autogroup: autogroup, notes: &notes) {
          prepared.append(site)
        }
      } catch {
        // A hierarchy of optional controllers only (v1 `cpu`) is done without; any other stops all.
        guard site.controllers.allSatisfy(\.isOptional) else { throw error }
        for c in site.controllers { notes.append(without(c, error, autogroup: autogroup)) }
      }
    }
    sites = prepared
    let swapUncounted = CgroupTree.swapIsOn(files) && !CgroupTree.swapIsCounted(sites, files: files)
    if swapUncounted {
      notes.append(
        "swap is on and the memory cgroup cannot count it (no memory.memsw / memory.swap.max; boot with "
          + "swapaccount=1): "
          + (sites.contains { $0.version == .v1 && $0.controllers.contains(.memory) }
            ? "workers get swappiness 0, so reaching the limit kills instead of swapping, but pages the "
              + "kernel swaps out under pressure from elsewhere stop counting"
            : "pages a worker has swapped out do not count towards its memory limit"))
    }
    return WorkerCgroups(
      sites: sites, files: files, hostPID: hostPID, swapUncounted: swapUncounted, notes: notes)
  }

  /// Prepares one site: the required controllers exactly as ever (any failure is thrown), the
  /// optional ones where they can be had (dropped from `site` with a note where not). false
  /// when nothing is left of the site.
  private static func prepare(
    _ site: inout Site, hostPID: Int32, files: any CgroupFiles, autogroup: Bool, notes: inout [String]
  ) throws(CgroupError) -> Bool {
    let required = site.controllers.filter { !$0.isOptional }
    var dropped: [String] = []
    func drop(_ c: CgroupController, _ why: CgroupError) {
      site.controllers.removeAll { $0 == c }
      dropped.append(without(c, why, autogroup: autogroup))
    }
    defer { notes += dropped }
    if site.version == .v2 {
      try CgroupTree.checkOffered(site.hostDirectory, required, files: files)
      for c in site.controllers where c.isOptional {
        do throws(CgroupError) { try CgroupTree.checkOffered(site.hostDirectory, [c], files: files) } catch {
          drop(c, error)
        }
      }
    }
    guard !site.controllers.isEmpty else { return false }
    notes += CgroupTree.removeStale(in: site, files: files, hostPID: hostPID)
    if site.version == .v2 {
      notes += try CgroupTree.enable(required, in: site.hostDirectory, hostPID: hostPID, files: files)
      for c in site.controllers where c.isOptional {
        do throws(CgroupError) {
          notes += try CgroupTree.enable([c], in: site.hostDirectory, hostPID: hostPID, files: files)
        } catch {
          drop(c, error)
        }
      }
      guard !site.controllers.isEmpty else { return false }
    }
    do {
      try files.makeDirectory(site.parent)
    } catch  where error.code == EEXIST {
      // A second preparation in the same process (tests) shares the directory.
    } catch {
      throw CgroupError.refused(site.lead, site.hostDirectory, error, files: files)
    }
    if site.version == .v2 {
      _ = try CgroupTree.enable(required, in: site.parent, hostPID: hostPID, files: files)
      for c in site.controllers where c.isOptional {
        do throws(CgroupError) {
          _ = try CgroupTree.enable([c], in: site.parent, hostPID: hostPID, files: files)
        } catch {
          drop(c, error)
        }
      }
    }
    if site.controllers.contains(.cpu) {
      notes += balanceCPU(site, files: files)
      notes += joinWorkersForCPU(&site, hostPID: hostPID, files: files)
    }
    return !site.controllers.isEmpty
  }

  /// Moves the host's process into `forsetti-<hostpid>/forsetti-host`, beside its workers'
  /// cgroups, at the weight of one module. Why: a module's host call is a ping-pong between one
  /// of its threads and the host thread serving its ring, and each wake-up must win a CPU. With
  /// the host outside the workers' parent, a wake-up crosses group boundaries and waits behind a
  /// busy sibling's slice: measured on Linux 6.18 (EEVDF, cgroup v1), a futex ping-pong beside a
  /// 16-thread spinner in a sibling group took p95 2.9–5.9 ms with the server outside the parent,
  /// 18–22 µs with it inside (as a task of the parent or a leaf in it). Inside, the host still
  /// gets at least a module's share however many modules spin, and the wake-up preempts at once.
  /// A failure costs only that latency: a note says so, and workers keep their own shares.
  private static func joinWorkersForCPU(_ site: inout Site, hostPID: Int32, files: any CgroupFiles)
    -> [String]
  {
    let leaf = CgroupHierarchy.join(site.parent, hostLeaf)
    // On v2 `enable` may have moved the host into a leaf beside `forsetti-<hostpid>` already.
    let beside = CgroupHierarchy.join(site.hostDirectory, hostLeaf)
    let home =
      site.version == .v2 && (try? CgroupTree.processes(in: beside, files: files))?.contains(hostPID) == true
      ? beside : site.hostDirectory
    do throws(CgroupError) {
      do {
        try files.makeDirectory(leaf)
      } catch  where error.code == EEXIST {
        // A second preparation in the same process.
      } catch {
        throw CgroupError.refused(.cpu, site.parent, error, files: files)
      }
      try WorkerCgroup.setCPU(
        weight: CPUShares.standardWeight, maxPercent: nil, version: site.version, in: leaf, files: files)
      do {
        try files.write(CgroupHierarchy.join(leaf, "cgroup.procs"), String(hostPID))
      } catch {
        throw CgroupError.refused(.cpu, leaf, error, files: files)
      }
      site.hostHome = home
      return []
    } catch {
      return [
        "the host's threads stay outside its workers' cpu cgroup (\(error)): a busy module can then "
          + "delay its neighbours' host calls by milliseconds"
      ]
    }
  }

  /// Gives the workers' parent and the host the same weight, explicitly (a leaf left by an
  /// earlier host might carry another). The host's threads that serve workers must never starve
  /// behind modules: on v2 the host's own processes sit in `forsetti-host`, a sibling of
  /// `forsetti-<hostpid>`, so under contention the host gets at least half of its cgroup's CPU
  /// however many modules spin; on v1 they stay in the host's cgroup beside `forsetti-<hostpid>`,
  /// where each host thread (in the root cgroup with autogroup: the host's session as a whole)
  /// weighs as much as all workers together, since the kernel schedules a cgroup's own tasks
  /// beside its child groups. Also says once when the kernel has no ceiling for `--cpu-max`.
  private static func balanceCPU(_ site: Site, files: any CgroupFiles) -> [String] {
    var notes: [String] = []
    var groups = [site.parent]
    let leaf = CgroupHierarchy.join(site.hostDirectory, hostLeaf)
    if site.version == .v2, files.exists(CgroupHierarchy.join(leaf, "cpu.weight")) { groups.append(leaf) }
    for group in groups {
      do throws(CgroupError) {
        try WorkerCgroup.setCPU(
          weight: CPUShares.standardWeight, maxPercent: nil, version: site.version, in: group, files: files)
      } catch {
        notes.append("could not set the standard cpu weight of \(group): \(error)")
      }
    }
    let ceiling = site.version == .v1 ? "cpu.cfs_quota_us" : "cpu.max"
    if !files.exists(CgroupHierarchy.join(site.parent, ceiling)) {
      notes.append(
        "no CPU ceiling: \(site.parent) has no \(ceiling) (a kernel without CFS bandwidth control), "
          + "so --cpu-max is not applied; weights are")
    }
    return notes
  }

  /// The note for an optional controller the host does without.
  private static func without(_ c: CgroupController, _ why: CgroupError, autogroup: Bool) -> String {
    "\(why); \(SchedulerAutogroup.consequence(applies: autogroup)) (--cpu-weight and --cpu-max are not "
      + "applied)"
  }

  /// `forsetti-<hostpid>` in each hierarchy used.
  package var parentDirectories: [String] { sites.map(\.parent) }

  /// Whether workers get the cpu controller (a weight, and a ceiling where the kernel has one).
  package var hasCPU: Bool { sites.contains { $0.controllers.contains(.cpu) } }

  /// One line for the start report: where the workers' cgroups are.
  package var summary: String {
    let versions = Set(sites.map(\.version.rawValue)).sorted().joined(separator: "+")
    let places = sites.map { s in s.controllers.map(\.rawValue).joined(separator: ",") + " in " + s.parent }
    return "cgroup \(versions): " + places.joined(separator: "; ")
  }

  /// Worker cgroups named by an image of the host before this one (`forsetti-host upgrade`):
  /// the names made from now on are numbered above theirs, so none is made twice.
  package func counted(_ directories: [String]) {
    for d in directories {
      guard let dash = d.lastIndex(of: "-"), let n = Int(d[d.index(after: dash)...]) else { continue }
      while true {
        let now = made.load(ordering: .relaxed)
        guard now < n, !made.compareExchange(expected: now, desired: n, ordering: .relaxed).exchanged else {
          break
        }
      }
    }
  }

  /// Makes the cgroup of one worker of `moduleID` with `limits` (no process in it yet: `add`).
  package func create(moduleID: String, limits: WorkerCgroup.Limits) throws(CgroupError) -> WorkerCgroup {
    let n = made.add(1, ordering: .relaxed).newValue
    let name = Self.sanitised(moduleID) + "-" + String(n)
    var places: [WorkerCgroup.Place] = []
    do throws(CgroupError) {
      for site in sites {
        let directory = CgroupHierarchy.join(site.parent, name)
        do {
          try files.makeDirectory(directory)
        } catch {
          throw CgroupError.refused(site.lead, site.parent, error, files: files)
        }
        places.append(
          WorkerCgroup.Place(version: site.version, directory: directory, controllers: site.controllers))
        try apply(limits, version: site.version, controllers: site.controllers, in: directory)
      }
    } catch {
      _ = try? WorkerCgroup(places: places, files: files, hostPID: hostPID).release()
      throw error
    }
    return WorkerCgroup(places: places, files: files, hostPID: hostPID)
  }

  /// Removes `forsetti-<hostpid>` where no worker cgroup is left in it (at host exit).
  package func close() {
    for site in sites {
      if let home = site.hostHome {
        // Back where it came from, so that the leaf, then the parent, can go.
        try? files.write(CgroupHierarchy.join(home, "cgroup.procs"), String(hostPID))
        try? files.removeDirectory(CgroupHierarchy.join(site.parent, Self.hostLeaf))
      }
      try? files.removeDirectory(site.parent)
    }
  }

  private func apply(
    _ limits: WorkerCgroup.Limits, version: CgroupPlacement.Version, controllers: [CgroupController],
    in directory: String
  ) throws(CgroupError) {
    func set(_ file: String, _ value: String, _ c: CgroupController) throws(CgroupError) {
      do {
        try files.write(CgroupHierarchy.join(directory, file), value)
      } catch {
        throw CgroupError.refused(c, directory, error, files: files)
      }
    }
    func has(_ file: String) -> Bool { files.exists(CgroupHierarchy.join(directory, file)) }
    if controllers.contains(.memory), let bytes = limits.memoryBytes {
      switch version {
      case .v1:
        // The plain limit first: memsw (memory plus swap) may never be below it, and starts unlimited.
        try set("memory.limit_in_bytes", String(bytes), .memory)
        if has("memory.memsw.limit_in_bytes") {
          try set("memory.memsw.limit_in_bytes", String(bytes), .memory)
        } else if swapUncounted {
          try set("memory.swappiness", "0", .memory)
        }
      case .v2:
        try set("memory.max", String(bytes), .memory)
        if has("memory.swap.max") { try set("memory.swap.max", "0", .memory) }
        // The whole worker goes at once, never a thread or child of it that leaves the rest crippled.
        if has("memory.oom.group") { try set("memory.oom.group", "1", .memory) }
      }
    }
    if controllers.contains(.pids), let tasks = limits.tasks {
      try set("pids.max", String(tasks), .pids)
    }
    if controllers.contains(.cpu) {
      try WorkerCgroup.setCPU(
        weight: limits.cpuWeight, maxPercent: limits.cpuMaxPercent, version: version, in: directory,
        files: files)
    }
  }

  /// A module id as a directory name: letters, digits, `.`, `_`, `-`; never `.` or `..`.
  static func sanitised(_ moduleID: String) -> String {
    let kept = moduleID.unicodeScalars.prefix(64).map { s -> Character in
      switch s {
      case "a"..."z", "A"..."Z", "0"..."9", ".", "_", "-": Character(s)
      default: "_"
      }
    }
    let name = String(kept)
    if name.isEmpty { return "module" }
    return name.hasPrefix(".") ? "_" + name : name
  }
}
