import CForsettiSys
import CSeccomp
import Glibc

/// Resource limits for one worker (setrlimit); `nil` leaves a limit as inherited.
public struct ResourceLimits: Sendable, Hashable {
  /// Address space (RLIMIT_AS): allocation beyond it fails inside the worker.
  public var memoryBytes: UInt64? = 2 << 30
  /// CPU time (RLIMIT_CPU): the kernel sends SIGXCPU, then SIGKILL.
  public var cpuSeconds: UInt64? = 600
  /// Open file descriptors (RLIMIT_NOFILE).
  public var openFiles: UInt64? = 256
  /// Largest file the worker may write (RLIMIT_FSIZE).
  public var fileSizeBytes: UInt64? = 1 << 30

  public init() {}
}

/// What a worker is allowed: read/execute paths (the module, its directory, the libraries it
/// loads), read/write paths (its sandbox), networking, and resource limits.
public struct ConfinementPolicy: Sendable, Hashable {
  public var readExecute: [String]
  public var readWrite: [String]
  public var networking: Bool
  public var limits: ResourceLimits

  public init(readExecute: [String], readWrite: [String], networking: Bool, limits: ResourceLimits) {
    self.readExecute = readExecute
    self.readWrite = readWrite
    self.networking = networking
    self.limits = limits
  }
}

/// What confinement achieved, for the host to report once at start and in `explain`.
public struct ConfinementReport: Sendable, Hashable, CustomStringConvertible {
  /// The landlock ABI used, or nil when the kernel has none.
  public var landlockABI: Int?
  /// Whether landlock also scopes signals (ABI 6+): the module cannot signal the host.
  public var signalsScoped: Bool
  public var seccomp: Bool
  public var missing: [String]

  public var description: String {
    var parts: [String] = []
    parts.append(
      landlockABI.map { "landlock ABI \($0)" + (signalsScoped ? " (signals scoped)" : "") } ?? "no landlock")
    parts.append(seccomp ? "seccomp filter" : "no seccomp")
    parts.append("no_new_privs, rlimits")
    return parts.joined(separator: ", ")
      + (missing.isEmpty ? "" : "; missing: " + missing.joined(separator: "; "))
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

  public static func apply(_ policy: ConfinementPolicy) -> Result<ConfinementReport, ConfinementError> {
    var report = ConfinementReport(landlockABI: nil, signalsScoped: false, seccomp: false, missing: [])
    guard forsetti_set_no_new_privs() == 0 else { return .failure(.init(step: "no_new_privs", errno: errno)) }
    if let e = applyLimits(policy.limits) { return .failure(e) }
    switch landlock(policy) {
    case .failure(let e): return .failure(e)
    case .success(let abi):
      report.landlockABI = abi
      report.signalsScoped = (abi ?? 0) >= 6
      if abi == nil {
        report.missing.append("landlock: the kernel has no landlock; filesystem access is not confined")
      }
    }
    switch seccomp(networking: policy.networking) {
    case .failure(let e): return .failure(e)
    case .success: report.seccomp = true
    }
    return .success(report)
  }

  package static func applyLimits(_ l: ResourceLimits) -> ConfinementError? {
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

  /// Denied outright: process creation and program execution, debugging other processes,
  /// kernel and namespace administration, and io_uring (which would bypass this filter).
  package static let deniedSyscalls = [
    "execve", "execveat", "fork", "vfork", "ptrace", "process_vm_readv", "process_vm_writev", "mount",
    "umount2",
    "pivot_root", "chroot", "bpf", "perf_event_open", "kexec_load", "kexec_file_load", "init_module",
    "finit_module", "delete_module", "reboot", "swapon", "swapoff", "setns", "unshare", "keyctl", "add_key",
    "request_key", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "open_by_handle_at",
    "name_to_handle_at",
  ]

  package static func seccomp(networking: Bool) -> Result<Void, ConfinementError> {
    guard let ctx = seccomp_init(forsetti_scmp_act_allow()) else {
      return .failure(.init(step: "seccomp_init", errno: ENOMEM))
    }
    defer { seccomp_release(ctx) }
    let eperm = forsetti_scmp_act_errno(UInt16(EPERM))
    func deny(_ name: String, _ action: UInt32, _ args: [scmp_arg_cmp] = []) -> ConfinementError? {
      let nr = seccomp_syscall_resolve_name(name)
      guard nr != __NR_SCMP_ERROR else { return nil }  // not on this architecture
      let rc = args.withUnsafeBufferPointer {
        seccomp_rule_add_array(ctx, action, nr, UInt32($0.count), $0.baseAddress)
      }
      return rc == 0 ? nil : .init(step: "seccomp rule \(name)", errno: -rc)
    }
    for name in deniedSyscalls { if let e = deny(name, eperm) { return .failure(e) } }
    // Threads are clone(CLONE_THREAD); anything else makes a process. clone3 passes its flags
    // in memory a filter cannot read, so it answers ENOSYS and glibc falls back to clone.
    let cloneThread: UInt64 = 0x0001_0000
    let noThread = scmp_arg_cmp(arg: 0, op: SCMP_CMP_MASKED_EQ, datum_a: cloneThread, datum_b: 0)
    if let e = deny("clone", eperm, [noThread]) { return .failure(e) }
    if let e = deny("clone3", forsetti_scmp_act_errno(UInt16(ENOSYS))) { return .failure(e) }
    if !networking {
      for name in ["socket", "connect", "bind", "listen", "accept", "accept4"] {
        if let e = deny(name, forsetti_scmp_act_errno(UInt16(EACCES))) { return .failure(e) }
      }
    }
    let rc = seccomp_load(ctx)
    return rc == 0 ? .success(()) : .failure(.init(step: "seccomp_load", errno: -rc))
  }
}
