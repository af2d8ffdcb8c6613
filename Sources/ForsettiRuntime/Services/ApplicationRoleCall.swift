import CForsetti
import ForsettiBridge
import ForsettiCore

/// What a module's role handler answered the application: its status as it is (or the host's:
/// FORSETTI_ERR_UNAVAILABLE, FORSETTI_ERR_TIMEOUT, …) and the response bytes.
public struct ModuleCallReply: Sendable, Equatable {
  /// The handler's status, or the status the call failed with before or instead of it.
  public var status: Int32
  /// At most FORSETTI_ROLE_MAX_PAYLOAD bytes; empty unless the handler answered.
  public var response: [UInt8]

  /// A reply of `status` with `response`.
  public init(status: Int32, response: [UInt8] = []) {
    self.status = status
    self.response = response
  }
}

extension HostServices {
  /// The prefix of the caller ID a role handler sees for a call from the application: a module
  /// ID is reverse-DNS and never holds a colon (forsetti/services/roles.h).
  public static let applicationCallerPrefix = "application:"

  /// Calls the module holding `role` (method and request in, status and response out) through
  /// the role registry, with a module's deadline and errors: FORSETTI_ERR_UNAVAILABLE when none
  /// serves, FORSETTI_ERR_TIMEOUT, FORSETTI_ERR_INVALID_ARGUMENT for a bad method or name,
  /// FORSETTI_ERR_TOO_LARGE, or the handler's status. The handler sees the caller
  /// `application:<application>`; `application` is 1–128 bytes without control characters.
  /// Blocks the calling thread for the call; any thread but a module's own role handler (whose
  /// own role would be refused as a cycle, FORSETTI_ERR_CALL_CYCLE).
  public func callRole(_ role: DefaultModuleRole, method: String, request: [UInt8], from application: String)
    -> ModuleCallReply
  {
    let name = application.utf8
    guard !name.isEmpty, name.count <= 128, !name.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
      return ModuleCallReply(status: FORSETTI_ERR_INVALID_ARGUMENT)
    }
    guard let capability = role.requiredCapability,
      let index = DefaultModuleRole.allCases.firstIndex(of: role)
    else { return ModuleCallReply(status: FORSETTI_ERR_UNAVAILABLE) }
    // The application may call every role a module may serve: it is granted what the role's
    // rules ask of a consumer, and serves none.
    let caller = ModuleCaller(
      moduleID: Self.applicationCallerPrefix + application, granted: [capability], calls: [role])
    let reply = roles.call(
      ServiceRequest(
        .roleCall, capacity: RoleCall.maxPayload, number: Int64(index),
        [Array(method.utf8), request, RolePath.current.bytes]),
      from: caller)
    return ModuleCallReply(status: reply.status, response: reply.bytes)
  }
}
