import ForsettiBridge
import Glibc
import Testing

/// The seccomp program a worker installs is compiled once (in the zygote) and given the
/// worker's pid by patching: it must be exactly the program compiled for that pid.
@Suite struct SeccompTemplateTests {
  @Test(arguments: [(false, false), (false, true), (true, false), (true, true)])
  func aPatchedProgramIsTheOneCompiledForThatPid(networking: Bool, memoryAccounted: Bool) throws {
    let rules = SyscallPolicy.rules(networking: networking, memoryAccounted: memoryAccounted)
    let template = try SeccompTemplate.prepared(networking: networking, memoryAccounted: memoryAccounted)
      .get()
    for pid: Int32 in [1, 2, 3, 255, 256, 65_535, 4_194_304, getpid()] {
      let compiled = try SeccompFilter(rules: rules, ownPID: pid)
      let patched = template.program(ownPID: pid)
      #expect(patched.bytes == compiled.bytes, "pid \(pid)")
      #expect(patched.count == compiled.count)
      #expect(patched.callCount == compiled.callCount)
    }
    // The policy does compare with the worker's own pid (kill, prlimit, …): two pids give two
    // programs, so the comparison above could fail.
    #expect(template.program(ownPID: 10).bytes != template.program(ownPID: 11).bytes)
  }
}
