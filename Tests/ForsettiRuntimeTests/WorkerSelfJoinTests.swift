import ForsettiBridge
import ForsettiTestSupport
import Foundation
import Glibc
import Testing

@testable import ForsettiRuntime

/// On cgroup v1 a worker moves itself into its own cgroups (`WorkerConfiguration.cgroupTasks`)
/// before it confines itself: the one move the kernel makes without waiting for an RCU grace
/// period. It must end up exactly where the host would have put it.
@Suite(.onTestThreads) struct WorkerSelfJoinTests {
  @Test func aWorkerIsInItsOwnMemoryAndPidsCgroups() throws {
    guard case .success(let cgroups) = HostCgroups.workerCgroups else { return }
    let h = RuntimeHarness()
    try ModuleFixture(moduleID: "com.test.selfjoin", entryPoint: "selfjoin_entry").install(in: h.dir)
    let m = try h.start(mode: RuntimeHarness.isolated())
    defer { m.stopAll() }
    let pid = try #require(m.workerPID("com.test.selfjoin"), "\(h.lines(nil))")
    let lines = ((try? String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8)) ?? "")
      .split(separator: "\n")
    let v1 = cgroups.sites.allSatisfy { $0.version == .v1 }
    // `hierarchy:controllers:path`; v2's one line has no controllers.
    let relevant = lines.filter { line in
      let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
      guard parts.count == 3 else { return false }
      let controllers = parts[1].split(separator: ",")
      return v1 ? controllers.contains("memory") || controllers.contains("pids") : parts[1].isEmpty
    }
    #expect(relevant.count == (v1 ? 2 : 1), "\(lines)")
    for line in relevant {
      #expect(line.contains("/forsetti-\(getpid())/com.test.selfjoin-"), "\(lines)")
    }
    #expect(
      h.lines(nil).allSatisfy { !$0.contains("cgroup") || !$0.contains("could not") }, "\(h.lines(nil))")
  }

  /// What a worker that cannot move itself says (its module then loads nothing: `WorkerMain`).
  @Test func aCgroupThatCannotBeJoinedIsNamedWithTheReason() throws {
    let dir = TemporaryDirectory("selfjoin")
    let missing = dir.url("no-such-cgroup/tasks")
    let said = WorkerMain.joinCgroup([missing])
    #expect(said == "\(missing): No such file or directory")
    #expect(WorkerMain.joinCgroup([]) == nil)
  }
}
