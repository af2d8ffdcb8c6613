import CFFI
import CForsetti
import ForsettiCore

extension HostFunctions {
  /// The table of a role service (forsetti/services/roles.h): `call` for a module that requires
  /// the role, `serve` for the one that holds it. The host checks both on every use.
  package static func roleService(_ b: ModuleBinding, _ role: DefaultModuleRole) throws(BindingError)
    -> UnsafeMutableRawPointer
  {
    let index = Int64(DefaultModuleRole.allCases.firstIndex(of: role) ?? 0)
    let call = try methodCall(b) { method, request, response, capacity, length in
      b.backend.callRole(
        index, method: method, request: request, response: response, capacity: capacity, length: length,
        from: b.caller)
    }
    let serve = try closure([FFIType.pointer, FFIType.pointer], FFIType.int32) { a in
      guard !b.isRevoked else { return revoked }
      let handler = a.pointer(0).map {
        ModuleCallback(function: unsafeBitCast($0, to: forsetti_role_handler.self), context: a.pointer(1))
      }
      return .int32(b.backend.serveRole(b.caller, handler: handler))
    }
    let t = UnsafeMutablePointer<forsetti_role_service>.allocate(capacity: 1)
    t.initialize(
      to: forsetti_role_service(
        struct_size: UInt32(MemoryLayout<forsetti_role_service>.size),
        call: call,
        serve: serve.function(
          as: (@convention(c) (forsetti_role_handler?, UnsafeMutableRawPointer?) -> Int32).self)))
    return UnsafeMutableRawPointer(t)
  }
}
