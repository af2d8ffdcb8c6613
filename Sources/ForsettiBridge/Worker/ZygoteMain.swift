import CForsettiSys
import ForsettiCore
import Glibc

/// The worker zygote (`forsetti-worker --zygote`): started once by the host, it forks one
/// worker per module (Chromium's and Android's way of starting processes), which then awaits its
/// configuration, confines itself and loads its module exactly as a spawned worker does. The
/// host's half is `Sources/ForsettiRuntime/Isolation/Zygote.swift`.
///
/// A fork skips the exec, the dynamic linking and the Swift runtime's start-up, and its pages
/// stay shared with the zygote until written. The zygote itself loads no module, reads no
/// configuration and holds nothing of one: what a worker shares with another is only what
/// both inherited read-only from here.
///
/// The host end of the control socket is file descriptor 3. The first message, unasked, is one
/// little-endian Int64: the zygote's pid (the process spawned hands over to a copy of itself,
/// the host's child, and ends), or -errno when it cannot fork here. Then each request is the
/// four bytes `fork` with three descriptors attached (the worker's socket, its call ring, the
/// write end of its output pipe); each reply is one Int64: the worker's pid, or -errno.
public enum ZygoteMain {
  public static let controlFD: Int32 = 3

  public static func run() -> Never {
    // No zygote outlives its host; its workers are the host's children (CLONE_PARENT) and set
    // their own parent-death signal.
    _ = forsetti_set_parent_death_signal(SIGKILL)
    warmUp()
    // The argument as the kernel shows it (`ps`): a worker says `--worker` there instead.
    let label = CommandLine.argc == 2 ? CommandLine.unsafeArgv[1] : nil
    forsetti_zygote_run(controlFD, { exit(WorkerMain.run(["--await-config"])) }, label)
  }

  /// Runs the worker's own code over sample input once, so that the pages it touches (lazily
  /// bound symbols, type metadata) are written here, once, and shared by every worker after; and
  /// compiles the seccomp program of each kind of worker, which a worker then only gives its pid.
  static func warmUp() {
    let policy = ConfinementPolicy(
      readExecute: ["/nonexistent"], readWrite: ["/nonexistent"], networking: false, limits: ResourceLimits(),
      memoryAccounted: true, temporaryDirectory: "/nonexistent/tmp")
    let sample = WorkerConfiguration(
      moduleID: "warm.up", library: "/nonexistent", entryPoint: "x", isSwift: false, sandbox: "/nonexistent",
      granted: [.storage], serves: .sharedDatabase, calls: [.sharedDatabase], policy: policy, parent: 1,
      environment: ["TMPDIR": "/nonexistent/tmp"])
    if let payload = try? JSONParser.parse(JSONWriter.string(sample.json)) {
      _ = ProtocolVersion.of(payload)
      _ = WorkerConfiguration(parsed: payload)
    }
    _ = JSONWriter.string(.object(JSONObject(ConfinementReport().json)))
    for networking in [false, true] {
      for memoryAccounted in [false, true] {
        _ = SeccompTemplate.prepared(networking: networking, memoryAccounted: memoryAccounted)
      }
    }
    let frame = WireFrame(.loadFailed, [.string("warm"), .int(1), .bytes([1, 2, 3])])
    let bytes = Wire.encode(frame)
    _ = bytes.withUnsafeBytes { try? Wire.decode($0) }
  }
}
