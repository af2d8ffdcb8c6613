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
        from: b.caller, path: RolePath.current.forCall())
    }
    let within = try methodCallWithin(b) { timeout in
      { method, request, response, capacity, length in
        b.backend.callRole(
          index, method: method, request: request, response: response, capacity: capacity, length: length,
          from: b.caller, path: RolePath.current.forCall(within: UInt64(timeout) &* 1_000_000))
      }
    }
    let serve = try closure([FFIType.pointer, FFIType.pointer], FFIType.int32) { a in
      guard !b.isRevoked else { return revoked }
      return .int32(b.backend.serveRole(b.caller, handler: handler(a), concurrency: 1))
    }
    let serveConcurrently = try closure([FFIType.pointer, FFIType.pointer, FFIType.uint32], FFIType.int32) {
      a in
      guard !b.isRevoked else { return revoked }
      let n = a.uint32(2)
      guard n >= 1, n <= FORSETTI_ROLE_MAX_CONCURRENCY else { return invalid }
      return .int32(b.backend.serveRole(b.caller, handler: handler(a), concurrency: Int(n)))
    }
    // Read on the handler's own thread: the path of the call it answers.
    let timeLeft = try closure([], FFIType.int64) { _ in .int64(Int64(bitPattern: RolePath.timeLeft)) }
    let t = UnsafeMutablePointer<forsetti_role_service>.allocate(capacity: 1)
    t.initialize(
      to: forsetti_role_service(
        struct_size: UInt32(MemoryLayout<forsetti_role_service>.size),
        call: call,
        serve: serve.function(
          as: (@convention(c) (forsetti_role_handler?, UnsafeMutableRawPointer?) -> Int32).self),
        serve_concurrently: serveConcurrently.function(
          as: (@convention(c) (forsetti_role_handler?, UnsafeMutableRawPointer?, UInt32) -> Int32).self),
        call_within: within,
        time_left_ns: timeLeft.function(as: (@convention(c) () -> UInt64).self)))
    return UnsafeMutableRawPointer(t)
  }

  /// The handler `serve` was given (arguments 0 and 1), nil for none.
  private static func handler(_ a: FFIArguments) -> ModuleCallback<forsetti_role_handler>? {
    a.pointer(0).map {
      ModuleCallback(function: unsafeBitCast($0, to: forsetti_role_handler.self), context: a.pointer(1))
    }
  }
}
