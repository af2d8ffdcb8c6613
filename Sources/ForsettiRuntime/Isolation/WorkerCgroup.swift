import Glibc
import Synchronization

/// The cgroup of one worker (one directory per hierarchy used): resident memory of every kind
/// (anonymous, shmem and memfd, page cache), with swap forbidden, and the number of tasks
/// (threads count) are held by the kernel whatever the module does; where the cpu controller is
/// had, its threads also share one CPU weight (and ceiling) instead of competing one by one.
package final class WorkerCgroup: Sendable {
  /// What a worker may hold.
  package struct Limits: Sendable, Equatable {
    /// Resident memory of every kind, in bytes; nil leaves it unlimited.
    package var memoryBytes: UInt64?
    /// Tasks: the worker's threads, and any process it could start; nil leaves it unlimited.
    package var tasks: Int?
    /// CPU weight against the other workers (v2 terms, `CPUShares`); nil leaves the kernel's.
    package var cpuWeight: Int?
    /// Hard CPU ceiling in percent of one CPU; nil: none.
    package var cpuMaxPercent: Int?

    /// Far above what a module's threads and the worker's own two need, low enough that a
    /// thread bomb stops at it.
    package static let defaultTasks = 128

    /// Limits for one worker (`bytes(mebibytes:)` converts `--memory-limit`).
    package init(
      memoryBytes: UInt64?, tasks: Int? = Limits.defaultTasks, cpuWeight: Int? = CPUShares.standardWeight,
      cpuMaxPercent: Int? = nil
    ) {
      self.memoryBytes = memoryBytes
      self.tasks = tasks
      self.cpuWeight = cpuWeight
      self.cpuMaxPercent = cpuMaxPercent
    }

    /// `mebibytes` as bytes; nil when that does not fit in 64 bits.
    package static func bytes(mebibytes: Int) -> UInt64? {
      guard mebibytes >= 0 else { return nil }
      let (bytes, overflow) = UInt64(mebibytes).multipliedReportingOverflow(by: 1 << 20)
      return overflow ? nil : bytes
    }
  }

  /// The worker's directory in one hierarchy, with the controllers it carries there.
  struct Place: Sendable, Equatable {
    var version: CgroupPlacement.Version
    var directory: String
    var controllers: [CgroupController]
  }

  let places: [Place]
  private let files: any CgroupFiles
  private let hostPID: Int32
  private let isReleased = Atomic<Bool>(false)

  /// How often, and how long apart, killing and removal are retried while the kernel finishes
  /// tearing the tasks down (about a second in all).
  static let attempts = 100
  static let pauseMilliseconds = 10

  init(places: [Place], files: any CgroupFiles, hostPID: Int32) {
    self.places = places
    self.files = files
    self.hostPID = hostPID
  }

  /// The worker's directories, one per hierarchy.
  package var directories: [String] { places.map(\.directory) }

  /// Moves process `pid` (all its threads) into the cgroup in every hierarchy. Call it before
  /// the worker runs module code: memory it allocated before stays charged where it was.
  package func add(pid: Int32) throws(CgroupError) {
    for place in places {
      guard !isReleased.load(ordering: .acquiring) else { throw .released(directory: place.directory) }
      do {
        try files.write(CgroupHierarchy.join(place.directory, "cgroup.procs"), String(pid))
      } catch {
        throw CgroupError.refused(place.controllers.first ?? .memory, place.directory, error, files: files)
      }
    }
  }

  /// The `tasks` file of each place when every place is cgroup v1, for a worker to move itself
  /// into (`WorkerConfiguration.cgroupTasks`); nil when the host must move it (cgroup v2).
  package var selfJoinTasks: [String]? {
    guard !places.isEmpty, places.allSatisfy({ $0.version == .v1 }) else { return nil }
    return places.map { CgroupHierarchy.join($0.directory, "tasks") }
  }

  /// Gives the worker `weight` and `maxPercent` (a spare worker's cgroup, made before its
  /// module was known, gets its module's here); nothing where the cpu controller is not had.
  package func setCPU(weight: Int?, maxPercent: Int?) throws(CgroupError) {
    for place in places where place.controllers.contains(.cpu) {
      try Self.setCPU(
        weight: weight, maxPercent: maxPercent, version: place.version, in: place.directory, files: files)
    }
  }

  /// Writes a CPU weight and ceiling into `directory`: v2 `cpu.weight` and `cpu.max`
  /// ("QUOTA PERIOD", or "max PERIOD" for none); v1 `cpu.shares`, `cpu.cfs_period_us` and
  /// `cpu.cfs_quota_us` (-1 for none). A kernel without CFS bandwidth control has no ceiling
  /// files: the ceiling is skipped (preparation said so once).
  static func setCPU(
    weight: Int?, maxPercent: Int?, version: CgroupPlacement.Version, in directory: String,
    files: any CgroupFiles
  ) throws(CgroupError) {
    func set(_ file: String, _ value: String) throws(CgroupError) {
      do {
        try files.write(CgroupHierarchy.join(directory, file), value)
      } catch {
        throw CgroupError.refused(.cpu, directory, error, files: files)
      }
    }
    func has(_ file: String) -> Bool { files.exists(CgroupHierarchy.join(directory, file)) }
    let period = CPUShares.periodMicroseconds
    let quota = maxPercent.map { CPUShares.quotaMicroseconds(percent: $0) }
    switch version {
    case .v1:
      if let weight { try set("cpu.shares", String(CPUShares.v1Shares(weight: weight))) }
      if has("cpu.cfs_quota_us") {
        // The period before the quota: the kernel checks the quota against the period in force.
        if quota != nil { try set("cpu.cfs_period_us", String(period)) }
        try set("cpu.cfs_quota_us", quota.map(String.init) ?? "-1")
      }
    case .v2:
      if let weight { try set("cpu.weight", String(weight)) }
      if has("cpu.max") { try set("cpu.max", (quota.map(String.init) ?? "max") + " " + String(period)) }
    }
  }

  /// The processes inside, across hierarchies.
  package func processes() -> [Int32] {
    var all = Set<Int32>()
    for place in places {
      if let pids = try? CgroupTree.processes(in: place.directory, files: files) { all.formUnion(pids) }
    }
    return all.sorted()
  }

  /// What the kernel says about the worker: OOM kills, hits of the memory and task limits, peak
  /// memory. Read it after the worker exits and before `release`, for the crash report.
  package func facts() -> WorkerCgroupFacts {
    var facts = WorkerCgroupFacts()
    for place in places {
      let read = { (file: String) in try? self.files.read(CgroupHierarchy.join(place.directory, file)) }
      if place.controllers.contains(.memory) {
        switch place.version {
        case .v1:
          facts.oomKills = read("memory.oom_control").flatMap { Self.field("oom_kill", in: $0) }
          facts.memoryLimitHits = read("memory.failcnt").flatMap { Self.number($0) }
          facts.peakBytes = read("memory.max_usage_in_bytes").flatMap(Self.bytes)
        case .v2:
          let events = read("memory.events")
          facts.oomKills = events.flatMap { Self.field("oom_kill", in: $0) }
          facts.memoryLimitHits = events.flatMap { Self.field("max", in: $0) }
          facts.peakBytes = read("memory.peak").flatMap(Self.bytes)
        }
        // v2 writes "max" for no limit; v1 a page-rounded 2^63 - 1.
        facts.memoryLimitBytes = read(place.version == .v1 ? "memory.limit_in_bytes" : "memory.max")
          .flatMap(Self.bytes).flatMap { $0 < 1 << 62 ? $0 : nil }
      }
      if place.controllers.contains(.pids) {
        facts.taskLimitHits = read("pids.events").flatMap { Self.field("max", in: $0) }
      }
    }
    return facts
  }

  /// Kills whatever is left inside (v2 `cgroup.kill`; v1 SIGKILL to each pid listed) and removes
  /// the directories, retrying briefly while the kernel finishes. Safe to call more than once.
  package func release() throws(CgroupError) {
    isReleased.store(true, ordering: .releasing)
    killAll()
    for place in places {
      var removed = false
      for _ in 0..<Self.attempts {
        do {
          try files.removeDirectory(place.directory)
          removed = true
          break
        } catch  where error.code == ENOENT {
          removed = true
          break
        } catch  where error.code == EBUSY || error.code == ENOTEMPTY {
          // A cgroup beneath this one keeps it busy whatever is killed: waiting cannot help.
          if let inner = try? files.subdirectories(place.directory), !inner.isEmpty { break }
          killAll()
          files.pause(milliseconds: Self.pauseMilliseconds)
        } catch {
          throw .file(error)
        }
      }
      guard removed else { throw .stillBusy(directory: place.directory, pids: processes()) }
    }
  }

  private func killAll() {
    for place in places where place.version == .v2 {
      let kill = CgroupHierarchy.join(place.directory, "cgroup.kill")
      // Since Linux 5.14: the kernel kills every task inside at once, new ones included.
      if files.exists(kill), (try? files.write(kill, "1")) != nil { return }
    }
    // Otherwise signal each pid listed until none is; a pid read here may exit and be reused
    // before the signal, which the short window and the task limit make unlikely.
    for _ in 0..<Self.attempts {
      let pids = processes().filter { $0 > 0 && $0 != hostPID }
      if pids.isEmpty { return }
      for pid in pids { files.kill(pid) }
      files.pause(milliseconds: Self.pauseMilliseconds)
    }
  }

  /// The number after `key` in a `key value` per line file (`memory.events`, `memory.oom_control`).
  static func field(_ key: String, in text: String) -> Int? {
    for line in text.split(separator: "\n") {
      let parts = line.split(separator: " ")
      if parts.count == 2, parts[0] == key { return Int(parts[1]) }
    }
    return nil
  }

  static func bytes(_ text: String) -> UInt64? {
    UInt64(text.split(whereSeparator: \.isWhitespace).first ?? "")
  }

  static func number(_ text: String) -> Int? {
    Int(text.split(whereSeparator: \.isWhitespace).first ?? "")
  }
}

/// What the kernel recorded about one worker's cgroup, for its crash report.
package struct WorkerCgroupFacts: Sendable, Equatable {
  /// Tasks the OOM killer took; nil when the kernel does not say (v1 before Linux 4.13).
  package var oomKills: Int?
  /// Times an allocation met the memory limit (v1 `memory.failcnt`, v2 `memory.events` max).
  package var memoryLimitHits: Int?
  /// The most memory it held (v1 `memory.max_usage_in_bytes`, v2 `memory.peak` since Linux 5.19).
  package var peakBytes: UInt64?
  /// The memory limit in force; nil when unlimited.
  package var memoryLimitBytes: UInt64?
  /// Times a new task was refused by the task limit (`pids.events` max).
  package var taskLimitHits: Int?

  /// Nothing known yet.
  package init() {}

  /// Whether the kernel killed the worker for its memory.
  package var wasOOMKilled: Bool { (oomKills ?? 0) > 0 }

  /// One line for a crash report, e.g. "killed by the kernel at its memory limit (peak 256.0 MiB of 256.0 MiB)".
  package var summary: String {
    func mib(_ b: UInt64) -> String {
      let tenths = (b >> 10) * 10 / 1024
      return "\(tenths / 10).\(tenths % 10) MiB"
    }
    var parts: [String] = []
    let peak = peakBytes.map { p in "peak " + mib(p) + (memoryLimitBytes.map { " of " + mib($0) } ?? "") }
    if wasOOMKilled {
      parts.append("killed by the kernel at its memory limit" + (peak.map { " (\($0))" } ?? ""))
    } else if let hits = memoryLimitHits, hits > 0 {
      parts.append("reached its memory limit \(hits) time(s)" + (peak.map { " (\($0))" } ?? ""))
    } else if let peak {
      parts.append(peak)
    }
    if let hits = taskLimitHits, hits > 0 { parts.append("refused \(hits) new task(s) at its task limit") }
    return parts.joined(separator: "; ")
  }
}
