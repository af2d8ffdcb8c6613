import CForsetti

/// A service the application embedding the host offers (forsetti/services/application.h): one
/// call shape, a method and request bytes in, response bytes out. Resolve it with
/// `Host.applicationService(_:)`.
public struct ApplicationService: @unchecked Sendable {
  // @unchecked: as RoleService — the table is the host's, valid until `stop` returns, and its
  // function may be called from any thread.
  let raw: UnsafePointer<forsetti_application_service>

  /// The most a request or a response may hold.
  public static let maxPayload = Int(FORSETTI_ROLE_MAX_PAYLOAD)

  /// Calls the application's handler and returns its response; its own status arrives as the
  /// matching case (or `.other`).
  public func call(_ method: String, _ request: [UInt8] = []) throws(ForsettiError) -> [UInt8] {
    try MethodCall.call(raw.pointee.call, method, request)
  }

  /// Calls with a UTF-8 request, for text protocols.
  public func call(_ method: String, text: String) throws(ForsettiError) -> [UInt8] {
    try call(method, Array(text.utf8))
  }
}
