import CForsetti
import ForsettiBridge
import ForsettiCore
import Synchronization

/// A service the embedding application offers modules (forsetti/services/application.h): an ID
/// under the application's rule, the capability a module needs to resolve and call it, and the
/// handler that answers. The handler runs on a host thread (the calling module's in-process, the
/// one serving the worker's calls otherwise), possibly on several at once.
public struct ApplicationService: Sendable {
  /// Lowercase reverse-DNS ending in the major version, e.g. `com.example.weather.v1`.
  public let id: String
  /// What a module must be granted to resolve and call the service.
  public let capability: Capability
  let handler: @Sendable (ApplicationServiceCall) -> ApplicationServiceReply

  /// Refuses an ID that breaks the rule (`ApplicationServiceError.invalidID`, saying why).
  public init(
    id: String, capability: Capability,
    handler: @escaping @Sendable (ApplicationServiceCall) -> ApplicationServiceReply
  ) throws(ApplicationServiceError) {
    if let why = ApplicationServiceID.problem(id) { throw .invalidID(id, why: why) }
    self.id = id
    self.capability = capability
    self.handler = handler
  }
}

/// One call of an application service, as the host bound it.
public struct ApplicationServiceCall: Sendable {
  /// The calling module, as the host bound it: a module cannot choose it.
  public let moduleID: String
  /// 1–256 bytes of UTF-8, without NUL.
  public let method: String
  /// At most FORSETTI_ROLE_MAX_PAYLOAD bytes.
  public let request: [UInt8]
}

/// The application's answer: a status the module receives as it is, and the response bytes.
public struct ApplicationServiceReply: Sendable {
  /// FORSETTI_OK or a FORSETTI_ERR_* status (or the application's own, negative or not).
  public var status: Int32
  /// At most FORSETTI_ROLE_MAX_PAYLOAD bytes; a longer response reaches the module as
  /// FORSETTI_ERR_IO.
  public var response: [UInt8]

  /// A reply of `status` with `response`.
  public init(status: Int32, response: [UInt8] = []) {
    self.status = status
    self.response = response
  }
}

/// Why an application service was not registered.
public enum ApplicationServiceError: Error, Sendable, Equatable, CustomStringConvertible {
  /// The ID breaks the rule of forsetti/services/application.h; `why` says how.
  case invalidID(String, why: String)
  /// A service of this ID is registered already.
  case duplicateID(String)

  public var description: String {
    switch self {
    case .invalidID(let id, let why):
      "\"\(id)\" is not an application service ID: \(why) (lowercase reverse-DNS ending in the major version, e.g. com.example.weather.v1)"
    case .duplicateID(let id): "an application service \"\(id)\" is registered already"
    }
  }
}

/// The services the embedding application offers modules, by ID. Registered before or while
/// modules run (a module resolving later finds a service registered later); never withdrawn,
/// so a table a module holds stays meaningful.
package final class ApplicationServices: Sendable {
  private let services = Mutex<[String: ApplicationService]>([:])

  /// An empty set: the host offers modules only its own services.
  package init() {}

  /// Offers `s` to modules from now on.
  package func register(_ s: ApplicationService) throws(ApplicationServiceError) {
    let added = services.withLock { all -> Bool in
      guard all[s.id] == nil else { return false }
      all[s.id] = s
      return true
    }
    guard added else { throw .duplicateID(s.id) }
  }

  /// The service `id` names, if registered.
  func service(_ id: String) -> ApplicationService? { services.withLock { $0[id] } }

  /// The answer to an `applicationResolve` or `applicationCall` of `caller`; `warn` records a
  /// refusal against it. The capability is checked on every call with the host's own grant.
  func answer(_ r: ServiceRequest, from caller: ModuleCaller, warn: (String) -> Void) -> ServiceReply {
    guard let id = r.text(0, max: ApplicationServiceID.maxLength), let service = service(id) else {
      return .status(FORSETTI_ERR_NOT_FOUND)
    }
    guard caller.granted.contains(service.capability) else {
      if r.operation == .applicationCall {
        warn(
          "\(ReasonCode.capabilityDenied.rawValue): a call of \(id) was refused: capability \(service.capability.rawValue) was not granted"
        )
      }
      return ServiceReply(FORSETTI_ERR_DENIED, Array(service.capability.rawValue.utf8))
    }
    guard r.operation == .applicationCall else { return .status(FORSETTI_OK) }
    // A C method name ends at its NUL; one inside could only come in a forged frame.
    guard let method = r.text(1), !method.isEmpty, !method.utf8.contains(0), let request = r.argument(2)
    else {
      return .status(FORSETTI_ERR_INVALID_ARGUMENT)
    }
    guard request.count <= RoleCall.maxPayload else { return .status(FORSETTI_ERR_TOO_LARGE) }
    let reply = service.handler(
      ApplicationServiceCall(moduleID: caller.moduleID, method: method, request: request))
    guard reply.response.count <= RoleCall.maxPayload else {
      warn(
        "\(id): the application's answer to \"\(method)\" was \(reply.response.count) bytes, more than \(RoleCall.maxPayload)"
      )
      return .status(FORSETTI_ERR_IO)
    }
    guard reply.response.count <= r.capacity else {
      return ServiceReply(FORSETTI_ERR_BUFFER_TOO_SMALL, length: reply.response.count)
    }
    return ServiceReply(reply.status, reply.response)
  }
}
