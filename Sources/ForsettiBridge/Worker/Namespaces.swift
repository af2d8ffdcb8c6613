import CForsettiSys
import Glibc

/// New user, IPC, UTS and (without networking) network namespaces for a worker. In its own user
/// namespace a worker holds no capability over anything of the machine's, whatever its uid: root
/// on the host is, to the kernel, a stranger to every other namespace.
package enum Namespaces {
  /// Namespaces entered, and those the kernel would not give with why.
  package struct Outcome: Sendable, Hashable {
    package var entered: [String] = []
    package var missing: [String] = []
  }

  static let newUser: Int32 = 0x1000_0000  // CLONE_NEWUSER
  static let newIPC: Int32 = 0x0800_0000  // CLONE_NEWIPC
  static let newUTS: Int32 = 0x0400_0000  // CLONE_NEWUTS
  static let newNet: Int32 = 0x4000_0000  // CLONE_NEWNET

  /// Enters the namespaces; a network namespace only when asked (`networkNamespace`, never with
  /// networking): creating one costs about 1 ms of kernel time per worker (measured here: 1.05 ms
  /// against 0.26 ms for everything else in this file), over 10% of a worker's start, while the
  /// seccomp filter already refuses every socket() to a worker without networking. The calling process must have a single thread (unshare of a user
  /// namespace refuses otherwise). A namespace the kernel does not offer is reported missing; a
  /// step that fails once the kernel has offered it fails the worker.
  package static func enter(networking: Bool, networkNamespace: Bool, threads: Int) -> Result<
    Outcome, ConfinementError
  > {
    var outcome = Outcome()
    // The kernel lets a process map only its effective ids into its own namespace.
    let uid = geteuid()
    let gid = getegid()
    if threads > 1 {
      // The kernel refuses a user namespace to a process with threads (EINVAL), which would
      // otherwise read as "not built into this kernel".
      outcome.missing.append("user namespace: \(threads) threads before confinement")
    } else if uid != 0,
      readFirstByte("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == UInt8(ascii: "1")
    {
      // Entering would succeed but leave the worker without the right to map its own uid.
      outcome.missing.append("user namespace: AppArmor restricts unprivileged user namespaces")
    } else if forsetti_unshare(newUser) != 0 {
      let e = errno
      outcome.missing.append("user namespace: \(refusal("user", e))")
    } else {
      // Only the outer uid and gid, each to itself: files keep their owner, nothing else maps.
      if let e = write("deny", to: "/proc/self/setgroups", step: "setgroups deny", absentIsFine: true) {
        return .failure(e)
      }
      if let e = write("\(uid) \(uid) 1", to: "/proc/self/uid_map", step: "uid_map") { return .failure(e) }
      if let e = write("\(gid) \(gid) 1", to: "/proc/self/gid_map", step: "gid_map") { return .failure(e) }
      outcome.entered.append("user")
    }
    var others: [(Int32, String)] = [(newIPC, "ipc"), (newUTS, "uts")]
    if networkNamespace && !networking { others.append((newNet, "net")) }
    for (flag, name) in others {
      guard forsetti_unshare(flag) != 0 else {
        outcome.entered.append(name)
        continue
      }
      // Read at once: building the strings below may change errno.
      let e = errno
      guard [EINVAL, EPERM, ENOSPC, EUSERS, ENOSYS].contains(e) else {
        return .failure(.init(step: "unshare \(name)", errno: e))
      }
      outcome.missing.append("\(name) namespace: \(refusal(name, e))")
    }
    return .success(outcome)
  }

  static func refusal(_ name: String, _ e: Int32) -> String {
    switch e {
    case EINVAL, ENOSYS: "not built into this kernel"
    case EPERM: name == "user" ? "refused by the kernel's settings" : "needs a user namespace or root"
    case ENOSPC, EUSERS: "the kernel's limit on \(name) namespaces is reached"
    default: String(cString: strerror(e))
    }
  }

  static func readFirstByte(_ path: String) -> UInt8? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var b: UInt8 = 0
    return read(fd, &b, 1) == 1 ? b : nil
  }

  static func write(_ text: String, to path: String, step: String, absentIsFine: Bool = false)
    -> ConfinementError?
  {
    let fd = open(path, O_WRONLY | O_CLOEXEC)
    guard fd >= 0 else { return absentIsFine && errno == ENOENT ? nil : .init(step: step, errno: errno) }
    defer { close(fd) }
    let n = text.withCString { Glibc.write(fd, $0, strlen($0)) }
    return n >= 0 ? nil : .init(step: step, errno: errno)
  }
}
