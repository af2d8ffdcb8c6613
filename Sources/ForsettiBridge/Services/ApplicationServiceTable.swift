import CForsetti
import ForsettiCore

extension HostFunctions {
  /// Whether the embedding application offers `id` to `b`'s module, as the host answers
  /// (`applicationResolve`, in-process and from a worker alike: the registry is the host's, and
  /// a service registered after a worker started is found too). A refusal is logged against the
  /// module like any other resolve.
  package static func applicationServiceOffered(_ id: String, to b: ModuleBinding) -> Bool {
    // Room for the name of the capability a refusal carries (from a worker, a reply longer
    // than the room is not believed).
    let reply = b.backend.service(
      ServiceRequest(.applicationResolve, capacity: 64, [Array(id.utf8)]), from: b.caller)
    switch reply.status {
    case FORSETTI_OK:
      return true
    case FORSETTI_ERR_DENIED:
      let capability = String(decoding: reply.bytes, as: UTF8.self)
      b.warn(
        "denied service resolution: \(id) needs capability \(capability), which was not granted",
        ["service": id, "capability": capability])
    case FORSETTI_ERR_NOT_FOUND:
      b.warn(
        "denied service resolution: unknown service \"\(id)\": the application offers no such service",
        ["service": id])
    default:
      b.warn("denied service resolution: \(id): the host answered \(reply.status)", ["service": id])
    }
    return false
  }

  /// The table of the application service `id` (forsetti/services/application.h). The host
  /// checks the capability and the limits again on every call, with the module as it bound it.
  package static func applicationService(_ b: ModuleBinding, _ id: String) throws(BindingError)
    -> UnsafeMutableRawPointer
  {
    let service = Array(id.utf8)
    let call = try methodCall(b) { method, request, response, capacity, length in
      b.backend.service(
        ServiceRequest(.applicationCall, capacity: capacity, [service, Array(method.utf8), Array(request)]),
        from: b.caller
      ).deliver(into: response, capacity: capacity, length: length)
    }
    let t = UnsafeMutablePointer<forsetti_application_service>.allocate(capacity: 1)
    t.initialize(
      to: forsetti_application_service(
        struct_size: UInt32(MemoryLayout<forsetti_application_service>.size),
        call: call))
    return UnsafeMutableRawPointer(t)
  }
}
