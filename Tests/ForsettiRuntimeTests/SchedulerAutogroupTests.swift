import Testing

@testable import ForsettiRuntime

/// Where no cpu cgroup of ours holds a worker, the start line says whether the kernel's autogroup
/// shares the CPU per module: only in the root cpu group, which each layout shows differently.
@Suite struct SchedulerAutogroupTests {
  static func v1(cpu directory: String?) -> CgroupHierarchy {
    var controllers: [CgroupController: CgroupHierarchy.Lookup] = [
      .memory: .found(
        CgroupPlacement(
          version: .v1, mountPoint: "/sys/fs/cgroup/memory", directory: "/sys/fs/cgroup/memory/x"))
    ]
    if let directory {
      controllers[.cpu] = .found(
        CgroupPlacement(version: .v1, mountPoint: "/sys/fs/cgroup/cpu", directory: directory))
    }
    return CgroupHierarchy(kind: .legacy, controllers: controllers)
  }

  static func v2(at directory: String) -> CgroupHierarchy {
    let p = CgroupPlacement(version: .v2, mountPoint: "/sys/fs/cgroup", directory: directory)
    return CgroupHierarchy(
      kind: .unified, controllers: [.memory: .found(p), .cpu: .unavailable(.notMounted(.cpu))])
  }

  @Test func v1AtTheRootOfTheCPUHierarchyOrWithoutOneIsTheRootGroup() {
    #expect(SchedulerAutogroup.inRootCPUGroup(hierarchy: Self.v1(cpu: "/sys/fs/cgroup/cpu")) { _ in nil })
    #expect(SchedulerAutogroup.inRootCPUGroup(hierarchy: Self.v1(cpu: nil)) { _ in nil })
    #expect(
      !SchedulerAutogroup.inRootCPUGroup(hierarchy: Self.v1(cpu: "/sys/fs/cgroup/cpu/user.slice")) { _ in nil
      })
  }

  @Test func v2WithoutTheCPUControllerHereLooksAtTheTopmostCgroup() {
    let h = Self.v2(at: "/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope")
    var asked: [String] = []
    let handedDown = SchedulerAutogroup.inRootCPUGroup(hierarchy: h) { path in
      asked.append(path)
      return "cpuset cpu io memory pids\n"
    }
    #expect(!handedDown)
    #expect(asked == ["/sys/fs/cgroup/user.slice/cgroup.controllers"])
    #expect(SchedulerAutogroup.inRootCPUGroup(hierarchy: h) { _ in "memory pids\n" })
    // Unreadable: not claimed.
    #expect(!SchedulerAutogroup.inRootCPUGroup(hierarchy: h) { _ in nil })
    #expect(SchedulerAutogroup.inRootCPUGroup(hierarchy: Self.v2(at: "/sys/fs/cgroup")) { _ in nil })
  }

  @Test func theStartLineSaysWhichItIs() {
    #expect(SchedulerAutogroup.consequence(applies: true).contains("as one through the kernel's autogroup"))
    #expect(SchedulerAutogroup.consequence(applies: false).contains("compete for the CPU one by one"))
  }
}
