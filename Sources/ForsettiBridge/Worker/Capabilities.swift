import CForsettiSys
import Glibc

/// Every capability given up: ambient, bounding, inheritable, permitted and effective. Run after
/// entering a user namespace, whose creation grants a full set inside it.
package enum Capabilities {
  /// Nil when everything is dropped; a note for the report when the bounding set had to stay
  /// (no CAP_SETPCAP to drop it: an unprivileged host without a user namespace). That set only
  /// bounds what a later execve could gain, and execve is refused.
  package static func dropAll() -> Result<String?, ConfinementError> {
    // EINVAL: a kernel before ambient capabilities (4.3), so there are none to clear.
    if forsetti_ambient_clear_all() != 0 && errno != EINVAL {
      return .failure(.init(step: "clear ambient capabilities", errno: errno))
    }
    var note: String?
    // Dropping a capability the set no longer holds succeeds; EINVAL is past the kernel's last.
    for cap in Int32(0)..<64 where forsetti_capbset_drop(cap) != 0 {
      if errno == EINVAL { break }
      guard errno == EPERM else {
        return .failure(.init(step: "drop bounding capability \(cap)", errno: errno))
      }
      note = "capability bounding set kept (no CAP_SETPCAP without a user namespace; execve is refused)"
      break
    }
    guard forsetti_capset_empty() == 0 else { return .failure(.init(step: "capset", errno: errno)) }
    guard forsetti_capabilities_held() == 0 else {
      return .failure(.init(step: "capget after capset", errno: EPERM))
    }
    return .success(note)
  }
}
