import CForsetti
import ForsettiCore
import ForsettiHost
import ForsettiRuntime

/// An application service whose handler is a C `forsetti_role_handler`.
enum CallbackService {
  /// The service `id` behind `capability`, answered by `handler` one call at a time.
  static func make(id: String, capability: Capability, handler: CCallback<forsetti_role_handler>)
    throws(EmbedFailure) -> ApplicationService
  {
    do {
      return try ApplicationService(id: id, capability: capability) { call in answer(call, handler) }
    } catch {
      throw .invalidValue("service_id", value: id, why: error.description)
    }
  }

  /// Hands one call to the C handler with room for the largest response a role may give.
  private static func answer(_ call: ApplicationServiceCall, _ handler: CCallback<forsetti_role_handler>)
    -> ApplicationServiceReply
  {
    let capacity = Int(FORSETTI_ROLE_MAX_PAYLOAD)
    var response = [UInt8](repeating: 0, count: capacity)
    var length = 0
    let status = handler.call { f, context in
      call.moduleID.withCString { caller in
        call.method.withCString { method in
          call.request.withUnsafeBytes { request in
            response.withUnsafeMutableBytes { out in
              f(
                context, caller, method, request.baseAddress, request.count, out.baseAddress, capacity,
                &length)
            }
          }
        }
      }
    }
    // A handler that claims more than it was given room for wrote past nothing we read, but its
    // answer cannot be trusted.
    guard length >= 0, length <= capacity else { return ApplicationServiceReply(status: FORSETTI_ERR_IO) }
    return ApplicationServiceReply(
      status: status, response: status == FORSETTI_OK ? Array(response[..<length]) : [])
  }
}
