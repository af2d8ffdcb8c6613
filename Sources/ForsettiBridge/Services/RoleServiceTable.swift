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
    let call = try closure(
      [FFIType.pointer, FFIType.pointer, FFIType.size, FFIType.pointer, FFIType.size, FFIType.pointer],
      FFIType.int32
    ) { a in
      guard !b.isRevoked else { return revoked }
      guard let method = name(a, 0), !method.isEmpty, let lengthOut = a.pointer(5) else { return invalid }
      guard a.size(2) <= RoleCall.maxPayload else { return .int32(FORSETTI_ERR_TOO_LARGE) }
      guard let request = buffer(a, 1, 2) else { return invalid }
      let capacity = min(a.size(4), RoleCall.maxPayload)
      guard capacity == 0 || a.pointer(3) != nil else { return invalid }
      return .int32(
        b.backend.callRole(
          index, method: method, request: request, response: a.pointer(3), capacity: capacity,
          length: lengthOut.assumingMemoryBound(to: Int.self), from: b.caller))
    }
    let serve = try closure([FFIType.pointer, FFIType.pointer], FFIType.int32) { a in
      guard !b.isRevoked else { return revoked }
      let handler = a.pointer(0).map {
        ModuleCallback(function: unsafeBitCast($0, to: forsetti_role_handler.self), context: a.pointer(1))
      }
      return .int32(b.backend.serveRole(b.caller, handler: handler))
    }
    typealias Call =
      @convention(c) (
        UnsafePointer<CChar>?, UnsafeRawPointer?, Int, UnsafeMutableRawPointer?, Int,
        UnsafeMutablePointer<Int>?
      ) -> Int32
    let t = UnsafeMutablePointer<forsetti_role_service>.allocate(capacity: 1)
    t.initialize(
      to: forsetti_role_service(
        struct_size: UInt32(MemoryLayout<forsetti_role_service>.size),
        call: call.function(as: Call.self),
        serve: serve.function(
          as: (@convention(c) (forsetti_role_handler?, UnsafeMutableRawPointer?) -> Int32).self)))
    return UnsafeMutableRawPointer(t)
  }
}
