import CForsetti
import ForsettiBridge
import ForsettiCore

/// The message guard of Forsetti: the sender is always the bound module, and empty, reserved
/// or self-addressed traffic is refused.
enum MessageGuard {
  static func eventProblem(type: String) -> String? {
    if type.isEmpty { return "empty event type" }
    if type.hasPrefix(EventBus.reservedPrefix) {
      return "the \(EventBus.reservedPrefix) prefix is reserved for the host"
    }
    return nil
  }

  static func messageProblem(from: String, to: String, type: String) -> String? {
    if to.isEmpty { return "empty target" }
    if to == from { return "a module cannot message itself" }
    return eventProblem(type: type)
  }
}

/// The host's own services: events, messages, telemetry and log of one `HostEnvironment`.
/// Worker requests end here too, attributed to the worker's module by its connection.
struct InProcessBackend: HostBackend {
  let environment: HostEnvironment
  /// This module instance, as the role registry tells instances apart.
  let instance = RoleRegistry.nextInstance()

  func warn(_ moduleID: String, _ reason: ReasonCode, _ message: String) {
    environment.log.write(
      LogRecord(
        level: .warning, moduleID: moduleID, message: "\(reason.rawValue): \(message)",
        metadata: ["reason": reason.rawValue]))
  }

  func log(moduleID: String, level: LogLevel, message: String, metadata: [String: String]) {
    environment.log.write(LogRecord(level: level, moduleID: moduleID, message: message, metadata: metadata))
  }

  func telemetry(moduleID: String, name: String, attributes: JSONValue?) -> Bool {
    guard let t = environment.telemetry else { return false }
    t.record(moduleID: moduleID, name: name, attributes: attributes)
    return true
  }

  func publish(from moduleID: String, type: String, payload: UnsafeRawBufferPointer) -> Int32 {
    if let problem = MessageGuard.eventProblem(type: type) {
      warn(moduleID, .moduleCommunicationDenied, "event \"\(type)\" refused: \(problem)")
      return FORSETTI_ERR_COMMUNICATION_DENIED
    }
    guard payload.count <= EventBus.maxPayload else { return FORSETTI_ERR_TOO_LARGE }
    let delivered = environment.events.publish(
      from: moduleID, eventType: type, payload: payload.baseAddress, length: payload.count)
    guard delivered != nil else {
      warn(
        moduleID, .moduleCommunicationDenied,
        "event \"\(type)\" refused: deliveries nested deeper than \(DeliveryDepth.limit)")
      return FORSETTI_ERR_COMMUNICATION_DENIED
    }
    return FORSETTI_OK
  }

  func subscribe(moduleID: String, type: String, handler: ModuleCallback<forsetti_event_handler>) -> Int64 {
    subscribe(moduleID: moduleID, type: type, target: .local(handler))
  }

  func subscribe(moduleID: String, type: String, target: DeliveryTarget<forsetti_event_handler>) -> Int64 {
    guard !type.isEmpty else { return Int64(FORSETTI_ERR_INVALID_ARGUMENT) }
    return environment.events.subscribe(moduleID: moduleID, eventType: type, target: target)
  }

  func unsubscribe(moduleID: String, id: Int64) -> Int32 {
    environment.events.unsubscribe(moduleID: moduleID, id: id) ? FORSETTI_OK : FORSETTI_ERR_NOT_FOUND
  }

  func unsubscriber(moduleID: String) -> Unsubscriber {
    let bus = environment.events
    let book = bus.book(moduleID)
    return { id in bus.unsubscribe(book, id: id) ? FORSETTI_OK : FORSETTI_ERR_NOT_FOUND }
  }

  func send(from moduleID: String, to target: String, type: String, payload: UnsafeRawBufferPointer) -> Int32
  {
    if let problem = MessageGuard.messageProblem(from: moduleID, to: target, type: type) {
      warn(moduleID, .moduleCommunicationDenied, "message \"\(type)\" to \"\(target)\" refused: \(problem)")
      return FORSETTI_ERR_COMMUNICATION_DENIED
    }
    guard payload.count <= EventBus.maxPayload else { return FORSETTI_ERR_TOO_LARGE }
    let result = environment.messages.deliver(
      from: moduleID, to: target, type: type, payload: payload.baseAddress, length: payload.count)
    switch result {
    case .delivered: return FORSETTI_OK
    case .noHandler: return FORSETTI_ERR_NOT_FOUND
    case .tooDeep:
      warn(
        moduleID, .moduleCommunicationDenied,
        "message \"\(type)\" refused: deliveries nested deeper than \(DeliveryDepth.limit)")
      return FORSETTI_ERR_COMMUNICATION_DENIED
    }
  }

  func setHandler(moduleID: String, handler: ModuleCallback<forsetti_message_handler>?) -> Int32 {
    setHandler(moduleID: moduleID, target: handler.map { .local($0) })
  }

  func setHandler(moduleID: String, target: DeliveryTarget<forsetti_message_handler>?) -> Int32 {
    environment.messages.setHandler(moduleID: moduleID, target) ? FORSETTI_OK : FORSETTI_ERR_REVOKED
  }

  func service(_ request: ServiceRequest, from caller: ModuleCaller) -> ServiceReply {
    environment.services.answer(request, from: caller)
  }

  func serveRole(_ caller: ModuleCaller, handler: ModuleCallback<forsetti_role_handler>?, concurrency: Int)
    -> Int32
  {
    environment.services.roles.serve(
      caller, instance: instance, handler.map { .local($0) }, concurrency: concurrency)
  }

  /// Enters (or withdraws) a worker's module as its role's provider.
  func serveRole(_ caller: ModuleCaller, remote: RoleRegistry.RemoteProvider?) -> Int32 {
    environment.services.roles.serve(caller, instance: instance, remote.map { .remote($0) })
  }

  func moduleStarting(moduleID: String) {
    environment.events.gate.open(moduleID)
    environment.messages.gate.open(moduleID)
  }

  func moduleStopping(moduleID: String) {
    environment.services.moduleGone(moduleID, instance: instance)
    environment.events.gate.close(moduleID)
    environment.messages.gate.close(moduleID)
    environment.events.removeAll(moduleID: moduleID)
    environment.messages.removeHandler(moduleID: moduleID)
    let quiet = environment.events.gate.quiesce(moduleID) && environment.messages.gate.quiesce(moduleID)
    if !quiet {
      environment.hostLog(
        .warning, about: moduleID, "a delivery to this module was still running after 1 s; stopping anyway")
    }
  }

  func moduleStopped(moduleID: String) {
    environment.services.moduleGone(moduleID, instance: instance)
    environment.events.gate.close(moduleID)
    environment.messages.gate.close(moduleID)
    environment.events.removeAll(moduleID: moduleID)
    environment.messages.removeHandler(moduleID: moduleID)
  }
}
