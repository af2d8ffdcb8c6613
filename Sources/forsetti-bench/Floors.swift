import Foundation
import Glibc

/// The floors in plain C (Benchmarks/floors/floors.c), compiled with cc into the benchmark's
/// temporary directory and run once per round beside the figure each is the floor of, so that a
/// ratio measures what Forsetti adds over the raw operation, not what Swift or Foundation add.
struct Floors: Sendable {
  /// The compiled helper, or nil when cc or libelf is missing (the rows then carry no floor).
  let executable: String?

  /// Compiles the helper once per run.
  static func build(packageRoot: String, work: String) -> Floors {
    let out = work + "/floors"
    let result = PeerBench.spawn(
      "/usr/bin/env",
      ["cc", "-O2", "-o", out, packageRoot + "/Benchmarks/floors/floors.c", "-lelf", "-ldl"],
      captureOutput: false)
    if result.status != 0 {
      FileHandle.standardError.write(
        Data("bench: floors: cc failed (status \(result.status)); rows carry no C floor\n".utf8))
    }
    return Floors(executable: result.status == 0 ? out : nil)
  }

  /// ns the helper measured for `command`, or nil when it could not do the work.
  func run(_ command: [String]) -> Double? {
    guard let exe = executable else { return nil }
    let r = PeerBench.spawn(exe, command, captureOutput: true)
    guard r.status == 0 else { return nil }
    return Double(r.output.trimmingCharacters(in: .whitespacesAndNewlines))
  }

  /// The whole helper process for `command`, spawn to reaped, as the figure it is compared with.
  func wholeProcess(_ command: [String]) -> Double? {
    guard let exe = executable else { return nil }
    let r = PeerBench.spawn(exe, command, captureOutput: false)
    return r.status == 0 ? r.ns : nil
  }

  /// Copy + dlopen + dlsym of `path` in C (the floor of a reload).
  func reload(_ path: String, symbol: String, scratch: String) -> Double? {
    run(["reload", path, symbol, scratch])
  }

  /// Reading `count` manifests whole and a libelf scan of each binary in C, in-process time.
  func gate(_ dir: String, count: Int) -> Double? { run(["gate", dir, "\(count)"]) }

  /// posix_spawn + waitpid of /bin/true in C, per spawn.
  func spawnTrue(_ count: Int) -> Double? { run(["spawn", "\(count)"]) }

  /// A SOCK_SEQPACKET socketpair echo to a forked child in C, per round trip.
  func echo(_ ops: Int) -> Double? { run(["echo", "\(ops)"]) }
}
