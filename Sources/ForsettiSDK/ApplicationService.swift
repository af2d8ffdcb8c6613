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
  /// matching case (or `.other`). The SDK gives the largest room a reply may take, so a call
  /// (and the application's action) is never repeated to fetch a longer answer.
  public func call(_ method: String, _ request: [UInt8] = []) throws(ForsettiError) -> [UInt8] {
    guard let call = raw.pointee.call else { throw .unavailable }
    var response = [UInt8](repeating: 0, count: Self.maxPayload)
    var length = 0
    let status = request.withUnsafeBytes { r in
      response.withUnsafeMutableBytes { out in
        method.withCString { call($0, r.baseAddress, r.count, out.baseAddress, out.count, &length) }
      }
    }
    try ForsettiError.check(status)
    guard length >= 0, length <= response.count else { throw .io }
    response.removeSubrange(length...)
    return response
  }

  /// Calls with a UTF-8 request, for text protocols.
  public func call(_ method: String, text: String) throws(ForsettiError) -> [UInt8] {
    try call(method, Array(text.utf8))
  }
}
