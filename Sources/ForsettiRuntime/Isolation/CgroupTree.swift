import Glibc

/// What preparing the workers' cgroups does to the hierarchy around them, apart from the
/// cgroups themselves (`WorkerCgroups`): checking and enabling controllers on the way down,
/// moving the host's own processes into a leaf, finding a host's processes, removing the cgroups
/// a host that died left behind, and whether swap is counted.
enum CgroupTree {
  /// cgroup v2: the host's cgroup must offer the controllers to its children.
  static func checkOffered(
    _ hostDirectory: String, _ controllers: [CgroupController], files: any CgroupFiles
  ) throws(CgroupError) {
    let listed: String
    do {
      listed = try files.read(CgroupHierarchy.join(hostDirectory, "cgroup.controllers"))
    } catch {
      throw .file(error)
    }
    let offered = Set(listed.split(whereSeparator: \.isWhitespace).map(String.init))
    for c in controllers where !offered.contains(c.rawValue) {
      throw .notDelegated(
        c, directory: hostDirectory,
        available: listed.split(whereSeparator: \.isWhitespace).joined(separator: " "))
    }
  }

  /// cgroup v2: enables `controllers` for the children of `directory`. A cgroup with processes
  /// cannot (the no-internal-processes rule, root excepted): as systemd's delegation guide
  /// advises, its processes then move into a leaf of their own (`forsetti-host`) first.
  static func enable(
    _ controllers: [CgroupController], in directory: String, hostPID: Int32, files: any CgroupFiles
  )
    throws(CgroupError) -> [String]
  {
    let control = CgroupHierarchy.join(directory, "cgroup.subtree_control")
    let present: Set<String>
    do {
      present = Set(try files.read(control).split(whereSeparator: \.isWhitespace).map(String.init))
    } catch {
      throw .file(error)
    }
    let missing = controllers.filter { !present.contains($0.rawValue) }
    guard let first = missing.first else { return [] }
    let request = missing.map { "+" + $0.rawValue }.joined(separator: " ")
    var notes: [String] = []
    // Processes may be spawned into the cgroup while its old ones move; a few rounds settle it.
    for _ in 0..<4 {
      do {
        try files.write(control, request)
        return notes
      } catch  where error.code == EBUSY {
        let leaf = CgroupHierarchy.join(directory, WorkerCgroups.hostLeaf)
        let moved = try moveProcesses(of: directory, into: leaf, hostPID: hostPID, files: files)
        if notes.isEmpty {
          notes.append(
            "moved \(moved) process(es) of \(directory) into \(leaf): cgroup v2 enables controllers only "
              + "for the children of a cgroup that has no processes")
        }
      } catch {
        throw refusedEnable(first, directory, error, files: files)
      }
    }
    throw .cannotEnable(first, directory: directory, code: EBUSY)
  }

  static func refusedEnable(
    _ c: CgroupController, _ directory: String, _ e: CgroupFileError, files: any CgroupFiles
  ) -> CgroupError {
    switch e.code {
    case EACCES, EPERM, EROFS: CgroupError.refused(c, directory, e, files: files)
    default: .cannotEnable(c, directory: directory, code: e.code)
    }
  }

  static func moveProcesses(
    of directory: String, into leaf: String, hostPID: Int32, files: any CgroupFiles
  )
    throws(CgroupError) -> Int
  {
    do {
      try files.makeDirectory(leaf)
    } catch  where error.code == EEXIST {
      // Left by an earlier host in the same cgroup (a restart of the same unit keeps none, but
      // a host run twice from one shell does): reused.
    } catch {
      throw CgroupError.refused(.memory, directory, error, files: files)
    }
    let pids = try processes(in: directory, files: files)
    // Only the host's own: a login session's scope, say, holds the shell and its sshd too, and
    // moving those is not the host's business (systemd owns that cgroup).
    for pid in pids where !isHostOrDescendant(pid, hostPID: hostPID, files: files) {
      let name = (try? files.read("/proc/\(pid)/comm"))?.split(separator: "\n").first.map(String.init) ?? "?"
      throw .sharedCgroup(directory: directory, pid: pid, name: name)
    }
    let target = CgroupHierarchy.join(leaf, "cgroup.procs")
    var moved = 0
    for pid in pids {
      do {
        try files.write(target, String(pid))
        moved += 1
      } catch  where error.code == ESRCH {
        // Exited meanwhile.
      } catch {
        throw .hostNotMovable(directory: directory, pid: pid, code: error.code)
      }
    }
    return moved
  }

  /// Whether `pid` is the host or started by it (at any depth), by the parent pids in /proc. A
  /// process gone meanwhile counts as the host's: there is nothing left to move.
  static func isHostOrDescendant(_ pid: Int32, hostPID: Int32, files: any CgroupFiles) -> Bool {
    var current = pid
    for _ in 0..<64 {
      if current == hostPID { return true }
      guard current > 1 else { return false }
      guard let stat = try? files.read("/proc/\(current)/stat") else { return current == pid }
      // "pid (comm) state ppid …": comm may hold spaces and parentheses, so read after the last ')'.
      guard let close = stat.lastIndex(of: ")") else { return false }
      let fields = stat[stat.index(after: close)...].split(separator: " ")
      guard fields.count > 1, let parent = Int32(fields[1]) else { return false }
      current = parent
    }
    return false
  }

  static func processes(in directory: String, files: any CgroupFiles) throws(CgroupError) -> [Int32] {
    let text: String
    do {
      text = try files.read(CgroupHierarchy.join(directory, "cgroup.procs"))
    } catch {
      throw .file(error)
    }
    return text.split(whereSeparator: \.isWhitespace).compactMap { Int32($0) }
  }

  /// Removes `forsetti-<pid>` cgroups whose host is no longer running: kills anything left in
  /// their workers' cgroups (workers die with their host, so normally nothing is) and removes them.
  static func removeStale(in site: WorkerCgroups.Site, files: any CgroupFiles, hostPID: Int32) -> [String] {
    var notes: [String] = []
    removeStale(
      under: site.hostDirectory, site: site, files: files, hostPID: hostPID, notes: &notes, depth: 0)
    return notes
  }

  /// A host started from inside another host's `forsetti-host` leaf (a test runner that embedded
  /// a host, say) nests its own `forsetti-<pid>` there; a leaf holding such a child cannot be
  /// removed, so stale children go first, depth first, a bounded number of levels down.
  static func removeStale(
    under directory: String, site: WorkerCgroups.Site, files: any CgroupFiles, hostPID: Int32,
    notes: inout [String],
    depth: Int
  ) {
    guard depth < 8, let names = try? files.subdirectories(directory) else { return }
    for name in names where name.hasPrefix(WorkerCgroups.prefix) {
      guard let pid = Int32(name.dropFirst(WorkerCgroups.prefix.count)), pid > 0, pid != hostPID,
        !files.isAlive(pid)
      else {
        continue
      }
      let parent = CgroupHierarchy.join(directory, name)
      let leaves = (try? files.subdirectories(parent)) ?? []
      var left: [String] = []
      for leaf in leaves {
        let leafDirectory = CgroupHierarchy.join(parent, leaf)
        removeStale(
          under: leafDirectory, site: site, files: files, hostPID: hostPID, notes: &notes, depth: depth + 1)
        let place = WorkerCgroup.Place(
          version: site.version, directory: leafDirectory, controllers: site.controllers)
        do {
          try WorkerCgroup(places: [place], files: files, hostPID: hostPID).release()
        } catch {
          left.append("\(error)")
        }
      }
      if left.isEmpty, (try? files.removeDirectory(parent)) != nil {
        notes.append("removed \(parent), left by host \(pid) which is no longer running")
      } else {
        notes.append("could not remove \(parent), left by host \(pid): " + left.joined(separator: "; "))
      }
    }
  }

  static func swapIsOn(_ files: any CgroupFiles) -> Bool {
    // The first line of /proc/swaps is a header; each further line is an active swap area.
    guard let text = try? files.read("/proc/swaps") else { return false }
    return text.split(separator: "\n").count > 1
  }

  static func swapIsCounted(_ sites: [WorkerCgroups.Site], files: any CgroupFiles) -> Bool {
    guard let site = sites.first(where: { $0.controllers.contains(.memory) }) else { return true }
    let file = site.version == .v1 ? "memory.memsw.limit_in_bytes" : "memory.swap.max"
    return files.exists(CgroupHierarchy.join(site.parent, file))
  }
}
