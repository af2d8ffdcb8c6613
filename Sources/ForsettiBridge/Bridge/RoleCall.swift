import CForsetti
import ForsettiCore

/// One call of a role's provider, as the provider receives it: who calls (the host's binding of
/// the caller, never the caller's say), the method, the request and the room for the response.
/// In-process the registry runs it on the caller's thread; to a worker it travels as a
/// `serveCall` frame on the worker's serve ring. Either way `run` is the one place a handler
/// is called and its answer checked.
package struct RoleCall: Sendable {
  package var caller: String
  package var method: String
  package var request: [UInt8]
  package var capacity: Int
  /// The roles on the call's path and its deadline, for the handler's own calls (`RolePath`).
  package var path: RolePath = .none

  /// Requests and responses at most FORSETTI_ROLE_MAX_PAYLOAD bytes.
  package static let maxPayload = Int(FORSETTI_ROLE_MAX_PAYLOAD)
  /// How long a caller waits for a provider in a worker (FORSETTI_ROLE_CALL_TIMEOUT_MS).
  package static let timeoutNanoseconds = UInt64(FORSETTI_ROLE_CALL_TIMEOUT_MS) * 1_000_000

  package init(caller: String, method: String, request: [UInt8], capacity: Int, path: RolePath = .none) {
    self.caller = caller
    self.method = method
    self.request = request
    self.capacity = max(0, min(capacity, Self.maxPayload))
    self.path = path
  }

  /// Writes the call as a `serveCall` frame.
  package func write(_ w: inout WireWriter) {
    request.withUnsafeBytes {
      Self.write(&w, capacity: capacity, caller: caller, method: method, request: $0, path: path)
    }
  }

  /// Writes a `serveCall` frame from the caller's own buffers (a consumer on its channel).
  package static func write(
    _ w: inout WireWriter, capacity: Int, caller: String, method: String, request: UnsafeRawBufferPointer,
    path: RolePath
  ) {
    w.int(Int64(capacity))
    w.string(caller)
    w.string(method)
    w.bytes(request)
    w.int(Int64(path.roles))
    w.int(Int64(bitPattern: path.deadline))
  }

  /// The call a `serveCall` frame carries, copied out of it (read by `Frame`).
  package init?(_ f: WireView) {
    guard let frame = Frame(f), let caller = Wire.text(frame.caller), let method = Wire.text(frame.method)
    else {
      return nil
    }
    self.init(
      caller: caller, method: method, request: Array(frame.request), capacity: frame.capacity,
      path: frame.path)
  }

  /// A `serveCall` frame's parts, read in place: the one reader of that frame, for the worker
  /// that answers it (without copies) and for the copy above. From the host or from a channel a
  /// consumer shares, so checked all the same: a method of 1 to 256 bytes without NUL, a
  /// request within the payload limit, the room clamped to it.
  package struct Frame {
    package let capacity: Int
    /// The caller the frame names (empty on a channel, whose label names it instead).
    package let caller: UnsafeRawBufferPointer
    package let method: UnsafeRawBufferPointer
    package let request: UnsafeRawBufferPointer
    /// The path the caller claims (none when the frame carries none).
    package let path: RolePath

    package init?(_ f: WireView) {
      guard f.kind == .serveCall, let room = f.int(0), let caller = f.bytes(1), let method = f.bytes(2),
        !method.isEmpty, method.count <= HostFunctions.maxName, !method.contains(0), let request = f.bytes(3),
        request.count <= RoleCall.maxPayload
      else { return nil }
      capacity = Int(clamping: max(0, min(room, Int64(RoleCall.maxPayload))))
      self.caller = caller
      self.method = method
      self.request = request
      path = RolePath(
        roles: UInt8(truncatingIfNeeded: f.int(4) ?? 0), deadline: UInt64(bitPattern: f.int(5) ?? 0))
    }
  }

  /// Runs `handler` on this call (in-process: the registry calls it on the caller's thread) as
  /// the provider of the role of index `role`.
  package func run(_ handler: ModuleCallback<forsetti_role_handler>, serving role: Int) -> ServiceReply {
    var response = [UInt8](repeating: 0, count: capacity)
    let (status, length) = caller.withCString { c in
      method.withCString { m in
        request.withUnsafeBytes { req in
          response.withUnsafeMutableBytes { out in
            Self.run(handler, caller: c, method: m, request: req, into: out, path: path.adding(role))
          }
        }
      }
    }
    guard status != FORSETTI_ERR_BUFFER_TOO_SMALL else { return ServiceReply(status, length: length) }
    return ServiceReply(status, Array(response[0..<length]))
  }

  /// Runs `handler` on one call given in place, writing its response into `response`: the one
  /// place a handler is called and its answer judged. A handler that claims to have written more
  /// than the room it had, or asks for more room than it had while answering
  /// FORSETTI_ERR_BUFFER_TOO_SMALL, or more than any response may hold, is answered
  /// FORSETTI_ERR_IO: its lengths are not passed on. The handler runs with `path` (which holds
  /// its own role) as its thread's: its own role calls are judged by it.
  package static func run(
    _ handler: ModuleCallback<forsetti_role_handler>, caller: UnsafePointer<CChar>,
    method: UnsafePointer<CChar>,
    request: UnsafeRawBufferPointer, into response: UnsafeMutableRawBufferPointer, path: RolePath
  ) -> (status: Int32, length: Int) {
    var length = 0
    let capacity = min(response.count, maxPayload)
    let status = RolePath.with(path.forCall()) {
      handler.function(
        handler.context, caller, method, request.baseAddress, request.count, response.baseAddress, capacity,
        &length)
    }
    if status == FORSETTI_ERR_BUFFER_TOO_SMALL {
      guard length > capacity, length <= maxPayload else { return (FORSETTI_ERR_IO, 0) }
      return (status, length)
    }
    guard length >= 0, length <= capacity else { return (FORSETTI_ERR_IO, 0) }
    return (status, length)
  }
}
