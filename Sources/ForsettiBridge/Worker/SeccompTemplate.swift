import Glibc

/// The seccomp program of each kind of worker, compiled once per process and given its own pid
/// by patching: the zygote compiles all four kinds before it forks (`ZygoteMain.warmUp`), so a
/// forked worker only writes its pid into the few instructions that compare with it, instead of
/// compiling `SyscallPolicy` anew (about 0.15 ms of CPU per worker start, measured in
/// `scripts/bench --only scale`).
package struct SeccompTemplate: Sendable {
  /// The program, compiled for a placeholder pid.
  let filter: SeccompFilter
  /// Byte offsets of the `k` fields that hold the pid.
  let pidOffsets: [Int]

  /// The program for the process whose pid is `ownPID`.
  package func program(ownPID: Int32) -> SeccompFilter {
    var f = filter
    let k = UInt32(bitPattern: ownPID)
    f.patch(pidOffsets, to: k)
    return f
  }

  /// Compiles `rules` twice, for two different pids: the instructions that differ are the ones
  /// holding the pid, whatever rule put them there. The programs must otherwise be alike (a
  /// comparison's shape never depends on the pid's value), which is checked.
  package init(rules: [SyscallPolicy.Rule]) throws(SeccompFilter.CompileError) {
    let a = try SeccompFilter(rules: rules, ownPID: 1)
    let b = try SeccompFilter(rules: rules, ownPID: 2)
    guard a.bytes.count == b.bytes.count else { throw .pidShapesProgram }
    var offsets: [Int] = []
    for instruction in 0..<a.count {
      let at = instruction * 8
      if a.bytes[at..<at + 4] != b.bytes[at..<at + 4] { throw .pidShapesProgram }
      if a.bytes[at + 4..<at + 8] != b.bytes[at + 4..<at + 8] { offsets.append(at + 4) }
    }
    filter = a
    pidOffsets = offsets
  }

  /// The four kinds of worker (with or without networking, with or without a memory cgroup),
  /// each compiled on first use and kept for the life of the process.
  package static func prepared(networking: Bool, memoryAccounted: Bool) -> Result<
    SeccompTemplate, SeccompFilter.CompileError
  > {
    switch (networking, memoryAccounted) {
    case (false, false): plain
    case (false, true): accounted
    case (true, false): networked
    case (true, true): networkedAccounted
    }
  }

  private static func compile(networking: Bool, memoryAccounted: Bool) -> Result<
    SeccompTemplate, SeccompFilter.CompileError
  > {
    Result { () throws(SeccompFilter.CompileError) in
      try SeccompTemplate(
        rules: SyscallPolicy.rules(networking: networking, memoryAccounted: memoryAccounted))
    }
  }
  private static let plain = compile(networking: false, memoryAccounted: false)
  private static let accounted = compile(networking: false, memoryAccounted: true)
  private static let networked = compile(networking: true, memoryAccounted: false)
  private static let networkedAccounted = compile(networking: true, memoryAccounted: true)
}
