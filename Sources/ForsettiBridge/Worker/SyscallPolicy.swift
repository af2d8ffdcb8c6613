import Glibc

/// What a worker may not do, as data: every system call the worker's seccomp filter refuses,
/// under which arguments, with which error, and why. Anything not named here is allowed: this is
/// a deny-list, because the Swift runtime, glibc and the modules themselves (Swift or C, with
/// Foundation or not) use a set of calls too wide to pin down without breaking a module the day
/// it calls something new. Two things bound it: calls numbered past `firstUnjudgedCall` (newer
/// than this policy) and calls of another ABI (i386, x32) are refused too. A refused call
/// returns an error number; the filter never kills. Compiled by `SeccompFilter`.
package enum SyscallPolicy {
  /// The rules, in the order the filter checks them.
  package static let rules: [Rule] = [
    // Processes and programs: a worker runs one module, in one process.
    .init(["execve", "execveat", "fork", "vfork"], .always, why: "no new programs or processes"),
    .init(["clone"], .whenMasked(arg: 0, mask: cloneThread, equals: 0), why: "threads only (CLONE_THREAD)"),
    .init(
      ["clone3"], .always, errno: ENOSYS,
      why: "flags in memory a filter cannot read; glibc falls back to clone"),
    // Other processes: none is the worker's business.
    .init(
      [
        "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "process_mrelease",
        "pidfd_getfd",
      ],
      .always, why: "no reading, writing or steering another process"),
    .init(["pidfd_send_signal"], .always, why: "its target is a descriptor a filter cannot resolve"),
    .init(
      ["kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open"],
      .unlessSelf(arg: 0, zeroIsSelf: false),
      why: "signals to itself only (kill(0) would reach the host's group)"),
    .init(
      [
        "prlimit64", "sched_setaffinity", "sched_setparam", "sched_setscheduler", "sched_setattr",
        "migrate_pages", "move_pages",
      ], .unlessSelf(arg: 0, zeroIsSelf: true), why: "limits, priority and placement of itself only"),
    .init(["setpriority"], .unlessOneOf(arg: 0, [0]), why: "PRIO_PROCESS only, not a group or a user"),
    .init(["setpriority"], .unlessSelf(arg: 1, zeroIsSelf: true), why: "its own priority only"),
    .init(["ioprio_set"], .unlessOneOf(arg: 0, [1]), why: "IOPRIO_WHO_PROCESS only"),
    .init(["ioprio_set"], .unlessSelf(arg: 1, zeroIsSelf: true), why: "its own I/O priority only"),
    .init(["kcmp"], .unlessSelf(arg: 0, zeroIsSelf: false), why: "compares within itself only"),
    // A descriptor's owner receives its SIGIO (or the signal F_SETSIG picks): the host's pid as
    // owner would be a signal past the kill rules. F_SETOWN_EX and the ioctls take the pid in
    // memory a filter cannot read.
    .init(
      ["fcntl"], .when(arg: 1, equals: 8, then: .unlessSelf(arg: 2, zeroIsSelf: true)),
      why: "F_SETOWN to itself only"),
    .init(["fcntl"], .when(arg: 1, equals: 15, then: .always), why: "no F_SETOWN_EX"),
    .init(["ioctl"], .whenMasked(arg: 1, mask: ~0, equals: 0x8901), why: "no FIOSETOWN"),
    .init(["ioctl"], .whenMasked(arg: 1, mask: ~0, equals: 0x8902), why: "no SIOCSPGRP"),
    .init(["kcmp"], .unlessSelf(arg: 1, zeroIsSelf: false), why: "compares within itself only"),
    // The machine: its clock, its name, its kernel.
    .init(
      [
        "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "stime", "sethostname", "setdomainname",
      ],
      .always, why: "the clock and the machine's name belong to the machine"),
    .init(["syslog"], .always, why: "the kernel log is not the module's"),
    // Files: landlock governs opening, creating, linking and renaming, but not ownership, mode or
    // extended attributes, and a root host's worker (uid 0, mapped to itself) owns every file
    // root owns: without these, it could chmod /etc/shadow by path or a library through a
    // descriptor it may read. Refused everywhere, its own sandbox included.
    .init(
      [
        "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "setxattr",
        "lsetxattr", "fsetxattr", "setxattrat", "file_setattr", "removexattr", "lremovexattr", "fremovexattr",
        "removexattrat",
      ], .always, why: "no changing owner, mode or extended attributes of any file"),
    .init(["ioctl"], .whenMasked(arg: 1, mask: ~0, equals: 0x4008_6602), why: "no chattr (FS_IOC_SETFLAGS)"),
    .init(
      ["ioctl"], .whenMasked(arg: 1, mask: ~0, equals: 0x4004_6602), why: "no chattr (FS_IOC32_SETFLAGS)"),
    .init(
      ["ioctl"], .whenMasked(arg: 1, mask: ~0, equals: 0x401c_5820), why: "no chattr (FS_IOC_FSSETXATTR)"),
    .init(["mknod"], .whenMasked(arg: 1, mask: fileType, equals: charDevice), why: "no device nodes"),
    .init(["mknod"], .whenMasked(arg: 1, mask: fileType, equals: blockDevice), why: "no device nodes"),
    .init(["mknodat"], .whenMasked(arg: 2, mask: fileType, equals: charDevice), why: "no device nodes"),
    .init(["mknodat"], .whenMasked(arg: 2, mask: fileType, equals: blockDevice), why: "no device nodes"),
    .init(
      [
        "mount", "umount2", "pivot_root", "chroot", "open_tree", "open_tree_attr", "move_mount", "fsopen",
        "fsconfig",
        "fsmount",
        "fspick", "mount_setattr", "setns", "unshare", "bpf", "perf_event_open", "kexec_load",
        "kexec_file_load",
        "init_module", "finit_module", "delete_module", "reboot", "swapon", "swapoff", "acct", "quotactl",
        "quotactl_fd", "iopl", "ioperm", "vhangup", "fanotify_init", "keyctl", "add_key", "request_key",
        "open_by_handle_at", "name_to_handle_at", "uselib", "modify_ldt",
      ], .always, why: "kernel, mount and namespace administration; legacy loader and LDT surface"),
    .init(
      ["userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register"], .always,
      why: "io_uring runs calls this filter never sees; userfaultfd stalls the kernel at will"),
    // Sockets: a socketpair of AF_UNIX always; socket() only for AF_INET/AF_INET6 with
    // networking, so no pathname or abstract unix socket, no packet, netlink or raw socket.
    .init(["socketpair"], .unlessOneOf(arg: 0, [UInt64(AF_UNIX)]), why: "AF_UNIX pairs only"),
    .init(
      ["socket", "connect", "bind", "listen", "accept", "accept4"], .always, scope: .withoutNetworking,
      why: "networking not granted"),
    .init(
      ["socket"], .unlessOneOf(arg: 0, [UInt64(AF_INET), UInt64(AF_INET6)]), scope: .withNetworking,
      why: "IP only: no unix, packet or netlink socket"),
    .init(
      ["socket"], .whenMasked(arg: 1, mask: 0xf, equals: UInt32(SOCK_RAW.rawValue)), scope: .withNetworking,
      why: "no raw sockets"),
    .init(
      ["socket"], .whenMasked(arg: 1, mask: 0xf, equals: UInt32(SOCK_PACKET.rawValue)),
      scope: .withNetworking,
      why: "no packet sockets"),
    // Memory that RLIMIT_AS does not count, when no memory cgroup counts it either.
    .init(
      ["memfd_create", "memfd_secret", "shmget"], .always, scope: .withoutMemoryAccounting,
      why: "memory held outside the address space limit"),
  ]

  /// Calls numbered from here on are newer than this policy (Linux 6.17 assigned up to 469; since
  /// 5.1 new calls have one number on every architecture): a call never judged is refused with
  /// ENOSYS, the answer of an older kernel, which glibc and runtimes handle.
  package static let firstUnjudgedCall: UInt32 = 470

  /// When a rule applies.
  package enum Scope: Sendable, Hashable {
    case always, withNetworking, withoutNetworking, withoutMemoryAccounting
  }

  /// Which calls of a system call a rule refuses.
  package enum Refusal: Sendable, Hashable {
    case always
    /// Unless argument `arg` names the worker itself: its pid, or 0 where the call reads 0 as "me".
    case unlessSelf(arg: Int, zeroIsSelf: Bool)
    /// Unless argument `arg` is one of these values (all 64 bits compared).
    case unlessOneOf(arg: Int, [UInt64])
    /// When the low 32 bits of argument `arg`, masked, equal the value.
    case whenMasked(arg: Int, mask: UInt32, equals: UInt32)
    /// When the low 32 bits of argument `arg` equal `value` (a command), then as `then` says.
    indirect case when(arg: Int, equals: UInt32, then: Refusal)
  }

  /// One line of the policy.
  package struct Rule: Sendable, Hashable {
    package var calls: [String]
    package var refusal: Refusal
    package var errno: Int32
    package var scope: Scope
    package var why: String

    init(_ calls: [String], _ refusal: Refusal, errno: Int32 = EPERM, scope: Scope = .always, why: String) {
      self.calls = calls
      self.refusal = refusal
      self.errno = errno
      self.scope = scope
      self.why = why
    }
  }

  static let cloneThread: UInt32 = 0x0001_0000
  static let fileType: UInt32 = 0o170000
  static let charDevice: UInt32 = 0o020000
  static let blockDevice: UInt32 = 0o060000

  /// The rules that apply to a worker with these grants.
  package static func rules(networking: Bool, memoryAccounted: Bool) -> [Rule] {
    rules.filter {
      switch $0.scope {
      case .always: true
      case .withNetworking: networking
      case .withoutNetworking: !networking
      case .withoutMemoryAccounting: !memoryAccounted
      }
    }
  }

}
