/// A controller the host limits each worker with.
package enum CgroupController: String, Sendable, CaseIterable, Comparable {
  // memory first: it names an error about a site that holds several.
  case memory, pids, cpu

  /// Whether workers still get cgroups without it: memory and pids are the containment the
  /// host promises; cpu (fair shares per module) is had where the kernel and delegation allow,
  /// and its absence is said once at start.
  package var isOptional: Bool { self == .cpu }

  /// By name, for a stable order in messages.
  package static func < (a: CgroupController, b: CgroupController) -> Bool { a.rawValue < b.rawValue }
}

/// Where one controller lives for this process: its hierarchy's version and mount point, and the
/// directory of the process's own cgroup in it.
package struct CgroupPlacement: Sendable, Equatable {
  /// cgroup v1 (one hierarchy per controller or group of controllers) or v2 (one unified tree).
  package enum Version: String, Sendable, Equatable { case v1, v2 }

  package var version: Version
  /// Where the hierarchy is mounted.
  package var mountPoint: String
  /// The process's own cgroup, as a path under `mountPoint`.
  package var directory: String

  /// A placement as detection finds it (tests build expected ones).
  package init(version: Version, mountPoint: String, directory: String) {
    self.version = version
    self.mountPoint = mountPoint
    self.directory = directory
  }
}

/// What cgroup support this process can see, read from `/proc/self/mountinfo` and
/// `/proc/self/cgroup`: which hierarchies are mounted (v2 unified, v1 per controller, both), and
/// for each controller the host needs either where it lives or why it cannot be used.
package struct CgroupHierarchy: Sendable, Equatable {
  /// The system's arrangement of hierarchies.
  package enum Kind: String, Sendable, Equatable {
    /// Only cgroup2 is mounted: every controller in one tree.
    case unified
    /// Only v1 hierarchies are mounted.
    case legacy
    /// Both: v1 controllers beside a cgroup2 tree (often one without controllers).
    case hybrid
    /// No cgroup filesystem is mounted.
    case none
  }

  /// A controller found, or the reason it cannot be used.
  package enum Lookup: Sendable, Equatable {
    case found(CgroupPlacement)
    case unavailable(CgroupError)
  }

  /// The arrangement found.
  package var kind: Kind
  /// For each controller the host uses: where it lives, or why it cannot be used.
  package var controllers: [CgroupController: Lookup]

  /// Where `controller` lives, or why the host cannot use it.
  package func placement(_ controller: CgroupController) throws(CgroupError) -> CgroupPlacement {
    switch controllers[controller] {
    case .found(let p): return p
    case .unavailable(let e): throw e
    case nil: throw .notMounted(controller)
    }
  }

  /// Reads this process's view through `files` (the kernel's, or a test's stand-in).
  package static func current(files: any CgroupFiles) throws(CgroupError) -> CgroupHierarchy {
    let mountinfo: String
    let cgroup: String
    do {
      mountinfo = try files.read("/proc/self/mountinfo")
      cgroup = try files.read("/proc/self/cgroup")
    } catch {
      throw .file(error)
    }
    return detect(mountinfo: mountinfo, cgroup: cgroup)
  }

  /// Decides, from the texts of `/proc/self/mountinfo` and `/proc/self/cgroup`, where each
  /// controller lives. A controller bound to a v1 hierarchy (a line `N:…memory…:/path` with
  /// N ≠ 0) is used there, since the kernel then keeps it out of the unified tree; otherwise it
  /// is looked for in cgroup2, whose `cgroup.controllers` is checked when the cgroup is made.
  package static func detect(mountinfo: String, cgroup: String) -> CgroupHierarchy {
    let mounts = mountinfo.split(separator: "\n").compactMap(Mount.init)
    let memberships = cgroup.split(separator: "\n").compactMap(Membership.init)
    let hasV1 = mounts.contains { $0.isV1 }
    let v2Mounts = mounts.filter { $0.fsType == "cgroup2" }
    let kind: Kind =
      switch (hasV1, !v2Mounts.isEmpty) {
      case (true, true): .hybrid
      case (true, false): .legacy
      case (false, true): .unified
      case (false, false): .none
      }
    var found: [CgroupController: Lookup] = [:]
    for controller in CgroupController.allCases {
      found[controller] = lookup(controller, mounts: mounts, memberships: memberships)
    }
    return CgroupHierarchy(kind: kind, controllers: found)
  }

  private static func lookup(_ controller: CgroupController, mounts: [Mount], memberships: [Membership])
    -> Lookup
  {
    if let v1 = memberships.first(where: { $0.id != "0" && $0.controllers.contains(controller.rawValue) }) {
      let candidates = mounts.filter { $0.isV1 && $0.superOptions.contains(controller.rawValue) }
      guard !candidates.isEmpty else { return .unavailable(.boundButNotMounted(controller, path: v1.path)) }
      return place(.v1, path: v1.path, among: candidates, controller: controller)
    }
    let v2 = mounts.filter { $0.fsType == "cgroup2" }
    guard let unified = memberships.first(where: { $0.id == "0" && $0.controllers.isEmpty }), !v2.isEmpty
    else { return .unavailable(.notMounted(controller)) }
    return place(.v2, path: unified.path, among: v2, controller: controller)
  }

  /// The mount through which `path` (a cgroup path as `/proc/self/cgroup` gives it) is visible:
  /// one whose root is `path` or an ancestor of it. A bind mount of a subtree that does not
  /// contain the process shows nothing of its cgroup.
  private static func place(
    _ version: CgroupPlacement.Version, path: String, among mounts: [Mount], controller: CgroupController
  ) -> Lookup {
    for m in mounts {
      guard let rest = relative(path, under: m.root) else { continue }
      let directory = rest.isEmpty ? m.mountPoint : join(m.mountPoint, rest)
      return .found(CgroupPlacement(version: version, mountPoint: m.mountPoint, directory: directory))
    }
    let roots = mounts.map { "\($0.mountPoint) (shows \($0.root))" }.joined(separator: ", ")
    return .unavailable(.notVisible(controller, path: path, mounts: roots))
  }

  /// `path` below `root`, without a leading slash ("" when equal); nil when not below it.
  private static func relative(_ path: String, under root: String) -> String? {
    if root == "/" { return String(path.drop { $0 == "/" }) }
    if path == root { return "" }
    guard path.hasPrefix(root + "/") else { return nil }
    return String(path.dropFirst(root.count + 1))
  }

  static func join(_ directory: String, _ name: String) -> String {
    directory.hasSuffix("/") ? directory + name : directory + "/" + name
  }

  /// One line of `/proc/self/mountinfo`: `id parent dev root mountpoint opts [tags…] - type source superopts`.
  struct Mount {
    var root: String
    var mountPoint: String
    var fsType: String
    var superOptions: [String]

    var isV1: Bool { fsType == "cgroup" }

    init?(_ line: Substring) {
      let fields = line.split(separator: " ", omittingEmptySubsequences: true)
      guard let dash = fields.firstIndex(of: "-"), dash >= 6, fields.count >= dash + 4 else { return nil }
      root = Mount.unescape(fields[3])
      mountPoint = Mount.unescape(fields[4])
      fsType = String(fields[dash + 1])
      superOptions = fields[dash + 3].split(separator: ",").map(String.init)
    }

    /// The kernel writes a space, tab, newline or backslash in a path as `\ooo` (octal).
    static func unescape(_ field: Substring) -> String {
      var out: [UInt8] = []
      let bytes = Array(field.utf8)
      var i = 0
      while i < bytes.count {
        if bytes[i] == UInt8(ascii: "\\"), bytes.count - i > 3, let value = octal(bytes[(i + 1)..<(i + 4)]) {
          out.append(value)
          i += 4
        } else {
          out.append(bytes[i])
          i += 1
        }
      }
      return String(decoding: out, as: UTF8.self)
    }

    private static func octal(_ digits: ArraySlice<UInt8>) -> UInt8? {
      guard digits.count == 3 else { return nil }
      var value = 0
      for d in digits {
        guard d >= UInt8(ascii: "0"), d <= UInt8(ascii: "7") else { return nil }
        value = value * 8 + Int(d - UInt8(ascii: "0"))
      }
      return value <= 255 ? UInt8(value) : nil
    }
  }

  /// One line of `/proc/self/cgroup`: `hierarchy-id:controllers:path` (`0::/path` for v2).
  struct Membership {
    var id: String
    var controllers: [String]
    var path: String

    init?(_ line: Substring) {
      let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
      guard parts.count == 3, parts[2].hasPrefix("/") else { return nil }
      id = String(parts[0])
      controllers = parts[1].split(separator: ",").map(String.init)
      path = String(parts[2])
    }
  }
}
