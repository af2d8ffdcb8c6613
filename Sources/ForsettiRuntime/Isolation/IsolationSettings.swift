import ForsettiBridge
import FoundationEssentials
import Glibc

/// How modules run.
package enum ExecutionMode: Sendable {
  /// In the host process: fastest; a crash takes the host down.
  case inProcess
  /// One confined worker process per module.
  case isolated(IsolationSettings)
}

/// Worker limits and supervision for isolated modules.
public struct IsolationSettings: Sendable {
  public var workerExecutable: String
  public var limits = ResourceLimits()
  /// Each module's CPU weight and ceiling in its cgroup (`--cpu-weight`, `--cpu-max`).
  public var cpu = CPUShares()
  /// Seconds a worker may take to confine, load and return from `start`.
  public var startTimeout: Double = 5
  /// Seconds `stop` may take before the worker is killed.
  public var stopTimeout: Double = 5
  /// Crashes restarted before the module is quarantined.
  public var maxRestarts = 3
  /// First restart delay; each further one doubles it.
  public var backoffBase: Double = 0.25
  /// Fork workers from a zygote (`Zygote`) rather than spawn each: faster and smaller, at the
  /// price of one address-space layout shared by all workers (docs/architecture.md says more).
  public var zygote = true
  /// The variables the operator passes to every worker (`--worker-env`); the rest of a worker's
  /// environment is fixed (`WorkerEnvironment`).
  public var workerEnvironment = WorkerEnvironment()
  /// What each module's sandbox directory may hold on disk, every file together
  /// (`--sandbox-quota`, `SandboxQuotaMeter`); nil: unbounded.
  public var sandboxBytes: UInt64? = 1 << 30

  public init(workerExecutable: String) { self.workerExecutable = workerExecutable }

  /// `forsetti-worker` next to the running executable (a build directory), else where an
  /// installation keeps it out of `PATH`: `PREFIX/libexec/forsetti/` for `PREFIX/bin/forsetti-host`,
  /// then `/usr/local/libexec/forsetti/` and `/usr/libexec/forsetti/` (`scripts/install`'s and the
  /// package's), which an application embedding the host finds its worker in. None there: the
  /// path beside the executable, which `ForsettiHost` then names as missing.
  public static var defaultWorker: String {
    let exe =
      (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
      ?? CommandLine.arguments[0]
    let bin = PathText.parent(exe)
    let beside = PathText.join(bin, "forsetti-worker")
    let candidates = [
      beside, PathText.join(PathText.parent(bin), "libexec/forsetti/forsetti-worker"),
      "/usr/local/libexec/forsetti/forsetti-worker", "/usr/libexec/forsetti/forsetti-worker",
    ]
    return candidates.first { access($0, X_OK) == 0 } ?? beside
  }

  /// Directories of every shared library mapped into this process, plus the usual system
  /// library directories: what a worker (the same toolchain) needs to read and map to load.
  package static func libraryDirectories() -> [String] {
    var dirs: Set<String> = ["/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib"]
    if let maps = try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8) {
      for line in maps.split(separator: "\n") {
        guard let slash = line.firstIndex(of: "/") else { continue }
        let path = String(line[slash...])
        if path.hasSuffix(".so") || path.contains(".so.") {
          dirs.insert(PathText.parent(path))
        }
      }
    }
    return dirs.sorted()
  }

  /// What the kernel offers, said once at start: "landlock ABI 7 (signals, abstract sockets
  /// scoped), capabilities dropped, user+ipc+uts+net namespaces, seccomp deny-list (N calls), …".
  package static func kernelSupport() -> String {
    var parts: [String] = []
    if let abi = Confinement.landlockABI {
      parts.append(
        "landlock ABI \(abi)"
          + (abi >= 6
            ? " (signals, abstract sockets scoped)"
            : " (signals and abstract sockets NOT scoped: needs ABI 6)"))
    } else {
      parts.append("NO landlock: worker file access is not confined")
    }
    parts.append("capabilities dropped")
    let namespaces = availableNamespaces()
    parts.append(
      namespaces.contains("user")
        ? namespaces.joined(separator: "+") + " namespaces"
        : "NO user namespace (\(namespaces.isEmpty ? "no" : namespaces.joined(separator: "+")) namespaces)")
    if FileManager.default.fileExists(atPath: "/proc/sys/kernel/seccomp/actions_avail") {
      let calls =
        (try? SeccompFilter(rules: SyscallPolicy.rules(networking: false, memoryAccounted: false), ownPID: 1))?
        .callCount ?? 0
      parts.append("seccomp deny-list (\(calls) calls)")
    } else {
      parts.append("NO seccomp: system calls are not filtered")
    }
    parts.append("no_new_privs, rlimits")
    return parts.joined(separator: ", ")
  }

  /// What bounds a module's bytes on disk, said once at start (docs/operator-guide.md, "Limits").
  public var diskBounds: String {
    let tmp =
      limits.temporaryBytes.map {
        "TMPDIR a tmpfs of \(SandboxQuota.mebibytes($0)) MiB in each worker, counted in its memory"
      }
      ?? "TMPDIR on the host's disk, unbounded (--tmpdir-size 0)"
    let sandbox =
      sandboxBytes.map {
        "each sandbox up to \(SandboxQuota.mebibytes($0)) MiB, counted by the host (past it a module's writes fail EFBIG)"
      } ?? "sandboxes unbounded (--sandbox-quota 0)"
    return "\(tmp); \(sandbox)"
  }

  /// Namespaces a worker of this host enters (a network namespace only on request: see
  /// `ConfinementPolicy.networkNamespace`).
  static func availableNamespaces() -> [String] {
    func read(_ path: String) -> String? {
      (try? String(contentsOfFile: path, encoding: .utf8))?.filter { !$0.isWhitespace }
    }
    let root = geteuid() == 0
    var user =
      FileManager.default.fileExists(atPath: "/proc/self/ns/user")
      && read("/proc/sys/user/max_user_namespaces") != "0"
    if !root
      && (read("/proc/sys/kernel/unprivileged_userns_clone") == "0"
        || read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1")
    {
      user = false
    }
    var out = user ? ["user"] : []
    if user || root {
      out += ["ipc", "uts"].filter { FileManager.default.fileExists(atPath: "/proc/self/ns/\($0)") }
    }
    return out
  }
}
