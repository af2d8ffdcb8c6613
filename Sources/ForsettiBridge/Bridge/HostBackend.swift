import CForsetti
import ForsettiCore
import Glibc

/// What a module's bound host functions reach, once arguments are checked and revocation is
/// ruled out: the host's services directly (in-process), or the host over IPC (in a worker).
/// Storage is not here: it is always served locally from the module's sandbox descriptor.
package protocol HostBackend: Sendable {
  func log(moduleID: String, level: LogLevel, message: String, metadata: [String: String])
  /// Whether the event was recorded (false when the telemetry log cannot be written).
  func telemetry(moduleID: String, name: String, attributes: JSONValue?) -> Bool
  func publish(from moduleID: String, type: String, payload: UnsafeRawBufferPointer) -> Int32
  func subscribe(moduleID: String, type: String, handler: ModuleCallback<forsetti_event_handler>) -> Int64
  func unsubscribe(moduleID: String, id: Int64) -> Int32
  /// `unsubscribe` for one module, found once when its events table is built, so that the bound
  /// function does not find the module again on every call (the hot path of a host call).
  func unsubscriber(moduleID: String) -> Unsubscriber
  func send(from moduleID: String, to target: String, type: String, payload: UnsafeRawBufferPointer) -> Int32
  func setHandler(moduleID: String, handler: ModuleCallback<forsetti_message_handler>?) -> Int32
  /// A call of a service of ABI 1.1 (`ServiceCall.swift`). In-process the host answers it; in a
  /// worker it crosses the call ring and the host answers it with its own `ModuleCaller`.
  func service(_ request: ServiceRequest, from caller: ModuleCaller) -> ServiceReply
  /// A call of the provider of the role numbered `role` (its index in
  /// `DefaultModuleRole.allCases`) into the caller's own buffers: `forsetti_role_service.call`,
  /// with `path` (the roles on the path of the call this thread answers, and the call's deadline).
  func callRole(
    _ role: Int64, method: String, request: UnsafeRawBufferPointer, response: UnsafeMutableRawPointer?,
    capacity: Int, length: UnsafeMutablePointer<Int>, from caller: ModuleCaller, path: RolePath
  ) -> Int32
  /// Installs (or, with nil, removes) the handler of the role `caller` holds, run by
  /// `concurrency` calls at once.
  func serveRole(_ caller: ModuleCaller, handler: ModuleCallback<forsetti_role_handler>?, concurrency: Int)
    -> Int32
  /// A new instance of the module is about to start: it may receive deliveries again.
  func moduleStarting(moduleID: String)
  /// The module is about to stop: take it off the bus and wait out deliveries in flight, so no
  /// handler of it runs once `stop` has begun (except one already running its own stop).
  func moduleStopping(moduleID: String)
  /// The module stopped: drop whatever the backend holds for it.
  func moduleStopped(moduleID: String)
}

/// `forsetti_events.unsubscribe` of one module: the token in, the status out.
package typealias Unsubscriber = @Sendable (Int64) -> Int32

extension HostBackend {
  package func unsubscriber(moduleID: String) -> Unsubscriber {
    { id in unsubscribe(moduleID: moduleID, id: id) }
  }

  package func callRole(
    _ role: Int64, method: String, request: UnsafeRawBufferPointer, response: UnsafeMutableRawPointer?,
    capacity: Int, length: UnsafeMutablePointer<Int>, from caller: ModuleCaller, path: RolePath
  ) -> Int32 {
    relayRoleCall(
      role, method: method, request: request, response: response, capacity: capacity, length: length,
      from: caller, path: path)
  }

  /// The role call as a `ServiceRequest` the host answers, with its path (`RolePath`: the host
  /// refuses a cycle, and gives the call no more time than the path's deadline).
  package func relayRoleCall(
    _ role: Int64, method: String, request: UnsafeRawBufferPointer, response: UnsafeMutableRawPointer?,
    capacity: Int, length: UnsafeMutablePointer<Int>, from caller: ModuleCaller, path: RolePath
  ) -> Int32 {
    let reply = service(
      ServiceRequest(
        .roleCall, capacity: capacity, number: role,
        [Array(method.utf8), Array(request), path.bytes]),
      from: caller)
    return reply.deliver(into: response, capacity: capacity, length: length)
  }
}
