import CFFI
import CForsetti

extension HostFunctions {
  /// `call(method, request, request_length, response, capacity, *response_length)`, the shape
  /// roles.h and application.h share.
  typealias MethodCall =
    @convention(c) (
      UnsafePointer<CChar>?, UnsafeRawPointer?, Int, UnsafeMutableRawPointer?, Int,
      UnsafeMutablePointer<Int>?
    ) -> Int32

  /// The bound `call` of a role or application service: revocation and every argument checked
  /// here, once, for both (a method of 1–256 bytes, a request of at most RoleCall.maxPayload, a
  /// response buffer when there is room), then `forward` with what was checked.
  static func methodCall(
    _ b: ModuleBinding,
    forward:
      @escaping @Sendable (
        _ method: String, _ request: UnsafeRawBufferPointer, _ response: UnsafeMutableRawPointer?,
        _ capacity: Int, _ length: UnsafeMutablePointer<Int>
      ) -> Int32
  ) throws(BindingError) -> MethodCall {
    let call = try closure(
      [FFIType.pointer, FFIType.pointer, FFIType.size, FFIType.pointer, FFIType.size, FFIType.pointer],
      FFIType.int32
    ) { a in
      guard !b.isRevoked else { return revoked }
      guard let method = name(a, 0), !method.isEmpty, let lengthOut = a.pointer(5) else { return invalid }
      guard a.size(2) <= RoleCall.maxPayload else { return .int32(FORSETTI_ERR_TOO_LARGE) }
      guard let request = buffer(a, 1, 2) else { return invalid }
      let capacity = min(a.size(4), RoleCall.maxPayload)
      guard capacity == 0 || a.pointer(3) != nil else { return invalid }
      return .int32(
        forward(method, request, a.pointer(3), capacity, lengthOut.assumingMemoryBound(to: Int.self)))
    }
    return call.function(as: MethodCall.self)
  }
}
