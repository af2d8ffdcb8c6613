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

  /// What the bound `call` forwards once its arguments are checked.
  typealias Forward =
    @Sendable (
      _ method: String, _ request: UnsafeRawBufferPointer, _ response: UnsafeMutableRawPointer?,
      _ capacity: Int, _ length: UnsafeMutablePointer<Int>
    ) -> Int32

  /// The bound `call` of a role or application service: revocation and every argument checked
  /// here, once, for both (a method of 1–256 bytes, a request of at most RoleCall.maxPayload, a
  /// response buffer when there is room), then `forward` with what was checked.
  static func methodCall(_ b: ModuleBinding, forward: @escaping Forward) throws(BindingError) -> MethodCall {
    let call = try closure(
      [FFIType.pointer, FFIType.pointer, FFIType.size, FFIType.pointer, FFIType.size, FFIType.pointer],
      FFIType.int32
    ) { a in checked(b, a, from: 0, forward) }
    return call.function(as: MethodCall.self)
  }

  /// `call_within(timeout_ms, method, request, request_length, response, capacity,
  /// *response_length)` of roles.h (ABI 1.3): `forward` gets the timeout first.
  typealias MethodCallWithin =
    @convention(c) (
      UInt32, UnsafePointer<CChar>?, UnsafeRawPointer?, Int, UnsafeMutableRawPointer?, Int,
      UnsafeMutablePointer<Int>?
    ) -> Int32

  static func methodCallWithin(
    _ b: ModuleBinding, forward: @escaping @Sendable (_ timeoutMilliseconds: UInt32) -> Forward
  ) throws(BindingError) -> MethodCallWithin {
    let call = try closure(
      [
        FFIType.uint32, FFIType.pointer, FFIType.pointer, FFIType.size, FFIType.pointer, FFIType.size,
        FFIType.pointer,
      ],
      FFIType.int32
    ) { a in checked(b, a, from: 1, forward(a.uint32(0))) }
    return call.function(as: MethodCallWithin.self)
  }

  /// The checks of a `call`, its arguments starting at index `o`.
  private static func checked(_ b: ModuleBinding, _ a: FFIArguments, from o: Int, _ forward: Forward)
    -> FFIReturn
  {
    guard !b.isRevoked else { return revoked }
    guard let method = name(a, o), !method.isEmpty, let lengthOut = a.pointer(o + 5) else { return invalid }
    guard a.size(o + 2) <= RoleCall.maxPayload else { return .int32(FORSETTI_ERR_TOO_LARGE) }
    guard let request = buffer(a, o + 1, o + 2) else { return invalid }
    let capacity = min(a.size(o + 4), RoleCall.maxPayload)
    guard capacity == 0 || a.pointer(o + 3) != nil else { return invalid }
    return .int32(
      forward(method, request, a.pointer(o + 3), capacity, lengthOut.assumingMemoryBound(to: Int.self)))
  }
}
