import ForsettiCore
import Glibc

/// The roles on the path of the role call a thread is answering, and that call's deadline: what
/// a handler's own role calls inherit. A call to a role already on the path would close a cycle
/// (A's handler calls B, whose handler calls A) and is refused before anything is sent
/// (FORSETTI_ERR_CALL_CYCLE); a call from a handler gets no more time than the call it answers
/// has left, so a provider whose handler waits on a slow provider still answers its own caller
/// in time. In-process the path lives on the handler's thread; between processes it travels in
/// the call (`serveCall`, the relayed `roleCall`).
///
/// A path that came from another process is a claim: a consumer can only make the calls made on
/// its own behalf fail sooner (a longer path, an earlier deadline), never another module's.
package struct RolePath: Sendable, Equatable {
  /// Bit `i`: `DefaultModuleRole.allCases[i]` is on the path.
  package var roles: UInt8
  /// CLOCK_MONOTONIC nanoseconds (one clock for every process of the machine); 0: none.
  package var deadline: UInt64

  package init(roles: UInt8 = 0, deadline: UInt64 = 0) {
    self.roles = roles
    self.deadline = deadline
  }

  /// No role call is being answered.
  package static let none = RolePath()

  /// Whether the role of index `role` is on the path.
  package func contains(_ role: Int) -> Bool {
    role >= 0 && role < 8 && roles & (1 << UInt8(role)) != 0
  }

  /// The path a handler serving the role of index `role` runs with.
  package func adding(_ role: Int) -> RolePath {
    guard role >= 0, role < 8 else { return self }
    return RolePath(roles: roles | (1 << UInt8(role)), deadline: deadline)
  }

  /// The deadline of a call starting now: FORSETTI_ROLE_CALL_TIMEOUT_MS from now, or the
  /// path's own if that comes first.
  package func deadlineFromNow() -> UInt64 {
    let own = CallRing.nanoseconds() &+ RoleCall.timeoutNanoseconds
    return deadline == 0 ? own : min(own, deadline)
  }

  /// The path with the deadline of a call starting now: what the call passes on. `within`
  /// (nanoseconds, 0 for none) is the caller's own, shorter limit (`call_within`).
  package func forCall(within: UInt64 = 0) -> RolePath {
    let d = deadlineFromNow()
    guard within > 0, within < RoleCall.timeoutNanoseconds else { return RolePath(roles: roles, deadline: d) }
    return RolePath(roles: roles, deadline: min(d, CallRing.nanoseconds() &+ within))
  }

  /// Nanoseconds left before the deadline of the call this thread answers; 0 when it has passed
  /// or the thread answers none (`time_left_ns`).
  package static var timeLeft: UInt64 {
    let d = current.deadline
    let now = CallRing.nanoseconds()
    return d > now ? d - now : 0
  }

  // MARK: on the wire

  /// As an argument of a relayed call: the roles, then the deadline (little-endian).
  package var bytes: [UInt8] {
    [roles] + withUnsafeBytes(of: deadline.littleEndian) { Array($0) }
  }

  /// A path from `bytes` (untrusted): none when they are not one.
  package init(bytes: [UInt8]?) {
    guard let bytes, bytes.count == 9 else {
      self = .none
      return
    }
    var d: UInt64 = 0
    for (i, b) in bytes[1...].enumerated() { d |= UInt64(b) << (8 * UInt64(i)) }
    self.init(roles: bytes[0], deadline: d)
  }

  // MARK: the thread's own

  /// The path of the call this thread is answering (none outside a handler).
  package static var current: RolePath {
    let r = UInt(bitPattern: pthread_getspecific(keys.roles))
    let d = UInt(bitPattern: pthread_getspecific(keys.deadline))
    return RolePath(roles: UInt8(truncatingIfNeeded: r), deadline: UInt64(truncatingIfNeeded: d))
  }

  /// Runs `body` with `path` as this thread's, then puts the previous one back.
  package static func with<T>(_ path: RolePath, _ body: () -> T) -> T {
    let old = current
    set(path)
    defer { set(old) }
    return body()
  }

  private static func set(_ p: RolePath) {
    pthread_setspecific(keys.roles, UnsafeRawPointer(bitPattern: UInt(truncatingIfNeeded: p.roles)))
    pthread_setspecific(keys.deadline, UnsafeRawPointer(bitPattern: UInt(truncatingIfNeeded: p.deadline)))
  }

  /// Two thread-specific words (a pointer holds 64 bits here: Linux on 64-bit only).
  private struct Keys: Sendable {
    let roles: pthread_key_t
    let deadline: pthread_key_t
  }

  private static let keys: Keys = {
    var r = pthread_key_t()
    var d = pthread_key_t()
    pthread_key_create(&r, nil)
    pthread_key_create(&d, nil)
    return Keys(roles: r, deadline: d)
  }()
}
