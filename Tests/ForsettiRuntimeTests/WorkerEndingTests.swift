import ForsettiCore
import Glibc
import Testing

@testable import ForsettiRuntime

/// The one rule for how a worker ended, which supervision, a reload's grace period and a stop
/// share: a violation first, then a hung handler, then the wait status.
@Suite struct WorkerEndingTests {
  let violation = ProtocolViolation(kind: 104, phase: .loading, detail: "out of turn")

  @Test func aViolationDecidesWhateverTheStatus() {
    let e = WorkerEnding.classify(violation: violation, hung: "hung", status: 0, cgroupVerdict: nil)
    #expect(e == .violated(violation))
    #expect(e.reason == .protocolViolation)
  }

  @Test func aHungHandlerIsACrashNamingTheVerdictAndTheExit() {
    let e = WorkerEnding.classify(violation: nil, hung: "role call hung", status: SIGKILL, cgroupVerdict: nil)
    #expect(e.reason == .crashed)
    #expect(e.description == "role call hung; worker killed by SIGKILL (Killed)")
  }

  @Test func theWaitStatusDecidesTheRest() {
    #expect(WorkerEnding.classify(violation: nil, hung: nil, status: 0, cgroupVerdict: nil) == .exited)
    let segv = WorkerEnding.classify(violation: nil, hung: nil, status: SIGSEGV, cgroupVerdict: nil)
    #expect(segv.description == "worker killed by SIGSEGV (Segmentation fault)")
    let three = WorkerEnding.classify(violation: nil, hung: nil, status: 3 << 8, cgroupVerdict: nil)
    #expect(three == .crashed(exit: "exited with status 3"))
    let oom = WorkerEnding.classify(
      violation: nil, hung: nil, status: SIGKILL, cgroupVerdict: "killed by the kernel at its memory limit")
    #expect(oom.description == "worker killed by SIGKILL (Killed); killed by the kernel at its memory limit")
    #expect(
      WorkerEnding.classify(violation: nil, hung: nil, status: nil, cgroupVerdict: nil)
        == .crashed(exit: "killed, not yet reaped"))
  }
}
