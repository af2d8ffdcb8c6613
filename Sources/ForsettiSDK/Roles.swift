import CForsetti

/// The default roles of forsetti/services/roles.h; a module serves the one its manifest holds
/// and calls those it consumes.
public enum Role: String, Sendable, CaseIterable {
  /// A database other modules keep rows in.
  case sharedDatabase = "shared_database"
  /// Sign-in and identity for other modules.
  case authentication
  /// Health checks and reports for other modules.
  case diagnostics
  /// An API other modules call.
  case api
  /// Security decisions for other modules.
  case security

  /// The service ID `resolve` takes, from the header rather than spelled again here.
  var serviceID: String {
    switch self {
    case .sharedDatabase: FORSETTI_SERVICE_ROLE_SHARED_DATABASE
    case .authentication: FORSETTI_SERVICE_ROLE_AUTHENTICATION
    case .diagnostics: FORSETTI_SERVICE_ROLE_DIAGNOSTICS
    case .api: FORSETTI_SERVICE_ROLE_API
    case .security: FORSETTI_SERVICE_ROLE_SECURITY
    }
  }
}

/// One call as the provider's handler sees it.
public struct RoleCall: Sendable {
  /// The calling module as the host bound it: key everything a caller owns on this, never on the request.
  public var caller: String
  /// The method name; version it ("put/2") rather than change what a name means.
  public var method: String
  /// The request bytes, copied out of the host's borrowed buffer.
  public var request: [UInt8]
  /// The request as UTF-8 text (invalid bytes repaired), for text protocols.
  public var text: String { String(decoding: request, as: UTF8.self) }
}

/// A role's service table: `call` for a consumer, `serve` for the module holding the role.
public struct RoleService: @unchecked Sendable {
  // @unchecked: as SecureStorage.
  let raw: UnsafePointer<forsetti_role_service>
  let box: ModuleBoxBase

  /// The most a request or a response may hold.
  public static let maxPayload = Int(FORSETTI_ROLE_MAX_PAYLOAD)

  /// Calls the provider and returns its response; the provider's own status arrives as the
  /// matching case (or `.other`), and `.unavailable`/`.timeout` mean try again later. Call from
  /// a thread of your own, not from `start`: a call may wait up to 10 s.
  public func call(_ method: String, _ request: [UInt8] = []) throws(ForsettiError) -> [UInt8] {
    try MethodCall.call(raw.pointee.call, method, request)
  }

  /// Calls with a deadline of the caller's own, `milliseconds` from now (ABI 1.3 hosts; on an
  /// older host the call has the host's deadline): `.timeout` once it passes.
  public func call(_ method: String, _ request: [UInt8] = [], within milliseconds: UInt32)
    throws(ForsettiError)
    -> [UInt8]
  {
    guard raw.pointee.struct_size >= MemoryLayout<forsetti_role_service>.size,
      let within = raw.pointee.call_within
    else { return try call(method, request) }
    return try MethodCall.call(body: { within(milliseconds, $0, $1, $2, $3, $4, $5) }, method, request)
  }

  /// Nanoseconds left of the call this thread's handler serves (0 outside a handler, or on a
  /// host older than ABI 1.3): a handler with slow work checks it and gives up in time.
  public var timeLeftNanoseconds: UInt64 {
    guard raw.pointee.struct_size >= MemoryLayout<forsetti_role_service>.size,
      let f = raw.pointee.time_left_ns
    else { return 0 }
    return f()
  }

  /// Calls with a UTF-8 request, for text protocols.
  public func call(_ method: String, text: String) throws(ForsettiError) -> [UInt8] {
    try call(method, Array(text.utf8))
  }

  /// Serves the role with `handler`, one call at a time on a thread that is not the module's:
  /// what it returns is the response, what it throws reaches the caller as that status.
  /// `.denied` for a module that does not hold the role.
  public func serve(_ handler: @escaping @Sendable (RoleCall) throws(ForsettiError) -> [UInt8])
    throws(ForsettiError)
  {
    guard let serve = raw.pointee.serve else { throw .unavailable }
    let context = box.retain(RoleHandlerBox(handler))
    try ForsettiError.check(serve(answerRoleCall, context))
  }

  /// Serves the role with `handler` running up to `concurrency` calls at once (1…16, ABI 1.3),
  /// so `handler` must be safe on that many threads together. `.unavailable` on an older host.
  public func serve(
    concurrency: UInt32, _ handler: @escaping @Sendable (RoleCall) throws(ForsettiError) -> [UInt8]
  ) throws(ForsettiError) {
    guard raw.pointee.struct_size >= MemoryLayout<forsetti_role_service>.size,
      let serve = raw.pointee.serve_concurrently
    else { throw .unavailable }
    let context = box.retain(RoleHandlerBox(handler))
    try ForsettiError.check(serve(answerRoleCall, context, concurrency))
  }

  /// Withdraws the handler, so calls fail with `.unavailable` from now on (as after `stop`).
  public func stopServing() throws(ForsettiError) {
    guard let serve = raw.pointee.serve else { throw .unavailable }
    try ForsettiError.check(serve(nil, nil))
  }
}

final class RoleHandlerBox: Sendable {
  let handler: @Sendable (RoleCall) throws(ForsettiError) -> [UInt8]
  init(_ h: @escaping @Sendable (RoleCall) throws(ForsettiError) -> [UInt8]) { handler = h }
}

/// The C side of `serve`: copies the borrowed call in, runs the Swift handler, and writes its
/// answer back only when it fits (BUFFER_TOO_SMALL with the size needed otherwise, as roles.h asks).
private let answerRoleCall: forsetti_role_handler = {
  context, caller, method, request, requestLength, response, capacity, responseLength in
  guard let context, let responseLength else { return FORSETTI_ERR_INVALID_ARGUMENT }
  responseLength.pointee = 0
  let box = Unmanaged<RoleHandlerBox>.fromOpaque(context).takeUnretainedValue()
  let call = RoleCall(
    caller: HostText.string(caller), method: HostText.string(method),
    request: HostText.bytes(request, requestLength))
  let answer: [UInt8]
  do throws(ForsettiError) {
    answer = try box.handler(call)
  } catch {
    return error.status
  }
  guard answer.count <= RoleService.maxPayload else { return FORSETTI_ERR_TOO_LARGE }
  responseLength.pointee = answer.count
  guard answer.count <= capacity else { return FORSETTI_ERR_BUFFER_TOO_SMALL }
  if let response {
    answer.withUnsafeBytes {
      UnsafeMutableRawBufferPointer(start: response, count: capacity).copyMemory(from: $0)
    }
  }
  return FORSETTI_OK
}

/// The `call` roles.h and application.h share, from Swift.
enum MethodCall {
  typealias Function =
    @convention(c) (
      UnsafePointer<CChar>?, UnsafeRawPointer?, Int, UnsafeMutableRawPointer?, Int, UnsafeMutablePointer<Int>?
    ) -> Int32

  /// Calls `function` with room for the largest response the host passes on, so the SDK never
  /// repeats a call (and with it the callee's action) to fetch a longer answer.
  static func call(_ function: Function?, _ method: String, _ request: [UInt8]) throws(ForsettiError)
    -> [UInt8]
  {
    guard let function else { throw .unavailable }
    return try call(body: { function($0, $1, $2, $3, $4, $5) }, method, request)
  }

  /// As above, for a call reached through a Swift closure (`call_within` with its timeout bound).
  static func call(
    body function: (
      UnsafePointer<CChar>?, UnsafeRawPointer?, Int, UnsafeMutableRawPointer?, Int, UnsafeMutablePointer<Int>?
    ) -> Int32,
    _ method: String, _ request: [UInt8]
  ) throws(ForsettiError) -> [UInt8] {
    var response = [UInt8](repeating: 0, count: RoleService.maxPayload)
    var length = 0
    let status = request.withUnsafeBytes { r in
      response.withUnsafeMutableBytes { out in
        method.withCString { function($0, r.baseAddress, r.count, out.baseAddress, out.count, &length) }
      }
    }
    try ForsettiError.check(status)
    guard length >= 0, length <= response.count else { throw .io }
    response.removeSubrange(length...)
    return response
  }
}
