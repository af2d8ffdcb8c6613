import CForsetti
import ForsettiCore
import ForsettiRuntime
import Synchronization

// Stand-ins for what branch wip/appsvc adds to ForsettiRuntime (application services, calls into
// a module's role), with exactly its declared shapes, so this branch builds on its own. The lead
// deletes this file when merging and passes `applicationServices` to `HostEnvironment.init`
// (ForsettiHost.start); nothing here resolves or calls anything.

/// Why an application service was refused.
public enum ApplicationServiceError: Error, Sendable, Equatable, CustomStringConvertible {
  /// Another service was registered with this ID.
  case duplicate(id: String)

  public var description: String {
    switch self {
    case .duplicate(let id): "an application service with ID \(id) is registered already"
    }
  }
}

/// One call of a module into an application service.
public struct ApplicationServiceCall: Sendable {
  public let moduleID: String
  public let method: String
  public let request: [UInt8]
}

/// An application service's answer: a forsetti.h status and the response bytes.
public struct ApplicationServiceReply: Sendable {
  public var status: Int32
  public var response: [UInt8]

  public init(status: Int32, response: [UInt8]) {
    self.status = status
    self.response = response
  }
}

/// A service the application offers modules under a versioned ID, behind a capability.
public struct ApplicationService: Sendable {
  public let id: String
  public let capability: Capability
  public let handler: @Sendable (ApplicationServiceCall) -> ApplicationServiceReply

  public init(
    id: String, capability: Capability,
    handler: @escaping @Sendable (ApplicationServiceCall) -> ApplicationServiceReply
  ) throws(ApplicationServiceError) {
    self.id = id
    self.capability = capability
    self.handler = handler
  }
}

/// The application's services of one host.
public final class ApplicationServices: Sendable {
  private let services = Mutex<[String: ApplicationService]>([:])

  public init() {}

  /// Adds `s`; its ID must be new.
  public func register(_ s: ApplicationService) throws(ApplicationServiceError) {
    let added = services.withLock { table in
      guard table[s.id] == nil else { return false }
      table[s.id] = s
      return true
    }
    guard added else { throw .duplicate(id: s.id) }
  }
}

/// A module's answer to an application's call: a forsetti.h status and the response bytes.
public struct ModuleCallReply: Sendable {
  public var status: Int32
  public var response: [UInt8]

  public init(status: Int32, response: [UInt8]) {
    self.status = status
    self.response = response
  }
}

extension HostServices {
  /// Calls `method` of the module serving `role` on behalf of `application`.
  public func callRole(_ role: DefaultModuleRole, method: String, request: [UInt8], from application: String)
    -> ModuleCallReply
  {
    ModuleCallReply(status: FORSETTI_ERR_UNAVAILABLE, response: [])
  }
}
