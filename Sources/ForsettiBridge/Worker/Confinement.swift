import CForsettiSys
import Glibc

/// Resource limits for one worker (setrlimit); `nil` leaves a limit as inherited.
public struct ResourceLimits: Sendable, Hashable {
  /// Address space (RLIMIT_AS): allocation beyond it fails inside the worker.
  public var memoryBytes: UInt64? = 2 << 30
  /// CPU time (RLIMIT_CPU): soft and hard limit alike, so the kernel kills the worker (SIGKILL).
  public var cpuSeconds: UInt64? = 600
  /// Open file descriptors (RLIMIT_NOFILE).
  public var openFiles: UInt64? = 256
  /// Largest file the worker may write (RLIMIT_FSIZE).
  public var fileSizeBytes: UInt64? = 1 << 30
  /// The size of the worker's `TMPDIR` (`ConfinementPolicy.temporaryDirectory`): a tmpfs of this
  /// many bytes mounted there in a mount namespace of the worker's own, so that what a module
  /// writes there never reaches the host's disk; nil leaves the directory as it is.
  public var temporaryBytes: UInt64? = 256 << 20

  public init() {}
}

/// What a worker is allowed: read/execute paths (the module, its directory, the libraries it
/// loads), read/write paths (its sandbox), networking, and resource limits.
public struct ConfinementPolicy: Sendable, Hashable {
  public var readExecute: [String]
  public var readWrite: [String]
  public var networking: Bool
  public var limits: ResourceLimits
  /// Whether a memory cgroup of its own counts everything the worker holds; when not, the calls
  /// that hold memory outside RLIMIT_AS (memfd_create, memfd_secret, shmget) are refused.
  public var memoryAccounted: Bool
  /// Whether a worker without networking also gets a network namespace of its own: about 1 ms
  /// more per start, for a worker whose every socket() the seccomp filter refuses already.
  public var networkNamespace: Bool
  /// The worker's `TMPDIR`, inside its sandbox: bounded by `limits.temporaryBytes`.
  public var temporaryDirectory: String?

  public init(
    readExecute: [String], readWrite: [String], networking: Bool, limits: ResourceLimits,
    memoryAccounted: Bool = false, networkNamespace: Bool = false, temporaryDirectory: String? = nil
  ) {
    self.temporaryDirectory = temporaryDirectory
    self.readExecute = readExecute
    self.readWrite = readWrite
    self.networking = networking
    self.limits = limits
    self.memoryAccounted = memoryAccounted
    self.networkNamespace = networkNamespace
  }
}

/// A step of confinement that failed where the kernel does support it: the worker must not run.
public struct ConfinementError: Error, Sendable, CustomStringConvertible {
  public var step: String
  public var errno: Int32
  public var description: String { "\(step): \(String(cString: strerror(errno)))" }
}

/// Confines the calling process. Must run before any thread is started: at landlock ABI 7 a
/// ruleset binds the calling thread and its future children only.
public enum Confinement {
  // landlock access rights (linux/landlock.h; Debian 12's header stops at ABI 3).
  package static let execute: UInt64 = 1 << 0
  package static let writeFile: UInt64 = 1 << 1
  package static let readFile: UInt64 = 1 << 2
  package static let readDir: UInt64 = 1 << 3
  package static let refer: UInt64 = 1 << 13
  package static let truncate: UInt64 = 1 << 14
  package static let ioctlDev: UInt64 = 1 << 15
  /// Rights that apply to a file (not a directory) rule.
  package static let fileRights: UInt64 = execute | writeFile | readFile | truncate | ioctlDev

  package static func handledFS(abi: Int) -> UInt64 {
    var rights: UInt64 = (1 << 13) - 1  // ABI 1: execute … make_sym
    if abi >= 2 { rights |= refer }
    if abi >= 3 { rights |= truncate }
    if abi >= 5 { rights |= ioctlDev }
    return rights
  }

  /// The kernel's landlock ABI, or nil when landlock is unavailable.
  public static var landlockABI: Int? {
    let v = forsetti_landlock_create_ruleset(nil, 0, 1)  // LANDLOCK_CREATE_RULESET_VERSION
    return v > 0 ? Int(v) : nil
  }

  /// Confines the calling process, in this order: namespaces (while capabilities still allow
  /// them), every capability dropped, no_new_privs, rlimits, landlock, then the seccomp filter
  /// (last, so that none of the calls before it needs allowing).
  public static func apply(_ policy: ConfinementPolicy) -> Result<ConfinementReport, ConfinementError> {
    var report = ConfinementReport()
    report.threadsBefore = Int(forsetti_thread_count())
    // Capabilities, landlock and seccomp each bind the calling thread only: a thread already
    // running would escape all three. The worker confines itself before it starts any.
    guard report.threadsBefore <= 1 else {
      return .failure(.init(step: "confinement with \(report.threadsBefore) threads running", errno: EINVAL))
    }
    switch Namespaces.enter(
      networking: policy.networking, networkNamespace: policy.networkNamespace, threads: report.threadsBefore)
    {
    case .failure(let e): return .failure(e)
    case .success(let n):
      report.namespaces = n.entered
      report.missing += n.missing
    }
    // While capabilities still allow it (in the worker's own user namespace, or as root).
    if let dir = policy.temporaryDirectory, let bytes = policy.limits.temporaryBytes {
      if forsetti_mount_tmpfs(dir, bytes) == 0 {
        report.namespaces.append("mount")
        report.temporaryBytes = bytes
      } else {
        let e = errno
        guard [EPERM, EINVAL, ENOSYS, ENOSPC, EUSERS].contains(e) else {
          return .failure(.init(step: "tmpfs at \(dir)", errno: e))
        }
        report.missing.append(
          "TMPDIR bound: no mount namespace for a tmpfs at \(dir) (\(String(cString: strerror(e)))): "
            + "what the module writes there is on the host's disk")
      }
    }
    switch Capabilities.dropAll() {
    case .failure(let e): return .failure(e)
    case .success(let note):
      report.capabilitiesDropped = true
      if let note { report.missing.append(note) }
    }
    guard forsetti_set_no_new_privs() == 0 else { return .failure(.init(step: "no_new_privs", errno: errno)) }
    if let e = applyLimits(policy.limits) { return .failure(e) }
    switch landlock(policy) {
    case .failure(let e): return .failure(e)
    case .success(let abi):
      report.landlockABI = abi
      report.signalsScoped = (abi ?? 0) >= 6
      if abi == nil {
        report.missing.append("landlock: the kernel has no landlock; filesystem access is not confined")
      } else if (abi ?? 0) < 6 {
        report.missing.append("landlock ABI 6: signals and abstract unix sockets are not scoped")
      }
    }
    switch seccomp(policy) {
    case .failure(let e): return .failure(e)
    case .success(let calls):
      report.seccomp = true
      report.seccompCalls = calls
      report.memoryBypassesRefused = !policy.memoryAccounted
    }
    return .success(report)
  }

  package static func applyLimits(_ l: ResourceLimits) -> ConfinementError? {
    // A write past RLIMIT_FSIZE (the sandbox quota's brake, set by the host) fails EFBIG
    // rather than killing the worker with SIGXFSZ: the module sees an error it can handle.
    signal(SIGXFSZ, SIG_IGN)
    let pairs: [(Int32, UInt64?, String)] = [
      (Int32(RLIMIT_AS.rawValue), l.memoryBytes, "RLIMIT_AS"),
      (Int32(RLIMIT_CPU.rawValue), l.cpuSeconds, "RLIMIT_CPU"),
      (Int32(RLIMIT_NOFILE.rawValue), l.openFiles, "RLIMIT_NOFILE"),
      (Int32(RLIMIT_FSIZE.rawValue), l.fileSizeBytes, "RLIMIT_FSIZE"),
      (Int32(RLIMIT_CORE.rawValue), 0, "RLIMIT_CORE"),
    ]
    for (resource, value, name) in pairs {
      guard let value else { continue }
      var r = rlimit(rlim_cur: rlim_t(value), rlim_max: rlim_t(value))
      guard setrlimit(__rlimit_resource_t(UInt32(resource)), &r) == 0 else {
        return .init(step: "setrlimit \(name)", errno: errno)
      }
    }
    return nil
  }

  package static func landlock(_ policy: ConfinementPolicy) -> Result<Int?, ConfinementError> {
    guard let abi = landlockABI else { return .success(nil) }
    let handled = handledFS(abi: abi)
    // struct landlock_ruleset_attr { u64 handled_access_fs; u64 handled_access_net; u64 scoped; }
    var attr: (UInt64, UInt64, UInt64) = (handled, 0, 0)
    var size = 8
    if abi >= 4 {
      size = 16
      if !policy.networking { attr.1 = 0b11 }  // bind and connect TCP
    }
    if abi >= 6 {
      size = 24
      attr.2 = 0b11  // abstract unix sockets and signals outside the domain
    }
    let fd = withUnsafePointer(to: &attr) { forsetti_landlock_create_ruleset($0, UInt(size), 0) }
    guard fd >= 0 else { return .failure(.init(step: "landlock_create_ruleset", errno: errno)) }
    defer { close(fd) }
    func allow(_ path: String, _ rights: UInt64) -> ConfinementError? {
      let p = open(path, FORSETTI_O_PATH | O_CLOEXEC)
      guard p >= 0 else { return nil }  // absent paths need no rule
      defer { close(p) }
      var st = stat()
      fstat(p, &st)
      let isDir = (st.st_mode & S_IFMT) == S_IFDIR
      let granted = (isDir ? rights : rights & fileRights) & handled
      guard forsetti_landlock_add_path_rule(fd, p, granted) == 0 else {
        return .init(step: "landlock_add_rule \(path)", errno: errno)
      }
      return nil
    }
    for path in policy.readExecute {
      if let e = allow(path, execute | readFile | readDir) { return .failure(e) }
    }
    for path in policy.readWrite {
      if let e = allow(path, handled) { return .failure(e) }
    }
    guard forsetti_landlock_restrict_self(fd) == 0 else {
      return .failure(.init(step: "landlock_restrict_self", errno: errno))
    }
    return .success(abi)
  }

  /// Installs `SyscallPolicy` for this process; the number of distinct calls it refuses.
  package static func seccomp(_ policy: ConfinementPolicy) -> Result<Int, ConfinementError> {
    let filter: SeccompFilter
    switch SeccompTemplate.prepared(networking: policy.networking, memoryAccounted: policy.memoryAccounted) {
    case .success(let template): filter = template.program(ownPID: getpid())
    case .failure(let error): return .failure(.init(step: "seccomp program: \(error)", errno: E2BIG))
    }
    guard filter.install() == 0 else { return .failure(.init(step: "seccomp install", errno: errno)) }
    return .success(filter.callCount)
  }
}
