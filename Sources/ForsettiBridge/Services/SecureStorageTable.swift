import CFFI
import CForsetti
import ForsettiCore

extension HostFunctions {
  /// The largest secure value (FORSETTI_SECURE_STORAGE_MAX_VALUE).
  package static let maxSecureValue = Int(FORSETTI_SECURE_STORAGE_MAX_VALUE)

  /// The table of secure storage (forsetti/services/secure_storage.h); every call becomes a `ServiceRequest` the host answers.
  package static func secureStorage(_ b: ModuleBinding) throws(BindingError) -> UnsafeMutableRawPointer {
    let set = try closure([FFIType.pointer, FFIType.pointer, FFIType.size], FFIType.int32) { a in
      guard !b.isRevoked else { return revoked }
      guard let key = name(a, 0), SandboxStorage.isValidKey(key) else { return invalid }
      guard a.size(2) <= maxSecureValue else { return .int32(FORSETTI_ERR_TOO_LARGE) }
      guard let value = buffer(a, 1, 2) else { return invalid }
      let reply = b.backend.service(
        ServiceRequest(.secureSet, [Array(key.utf8), Array(value)]), from: b.caller)
      return .int32(reply.status)
    }
    let get = try closure([FFIType.pointer, FFIType.pointer, FFIType.size, FFIType.pointer], FFIType.int32) {
      a in
      guard !b.isRevoked else { return revoked }
      guard let key = name(a, 0), SandboxStorage.isValidKey(key), let lengthOut = a.pointer(3) else {
        return invalid
      }
      // No value is larger than the limit, so more room is never needed.
      let capacity = min(a.size(2), maxSecureValue)
      guard capacity == 0 || a.pointer(1) != nil else { return invalid }
      let reply = b.backend.service(
        ServiceRequest(.secureGet, capacity: capacity, [Array(key.utf8)]), from: b.caller)
      return .int32(
        reply.deliver(
          into: a.pointer(1), capacity: capacity, length: lengthOut.assumingMemoryBound(to: Int.self)))
    }
    let remove = try closure([FFIType.pointer], FFIType.int32) { a in
      guard !b.isRevoked else { return revoked }
      guard let key = name(a, 0), SandboxStorage.isValidKey(key) else { return invalid }
      return .int32(
        b.backend.service(ServiceRequest(.secureRemove, [Array(key.utf8)]), from: b.caller).status)
    }
    let t = UnsafeMutablePointer<forsetti_secure_storage>.allocate(capacity: 1)
    t.initialize(
      to: forsetti_secure_storage(
        struct_size: UInt32(MemoryLayout<forsetti_secure_storage>.size),
        set: set.function(
          as: (@convention(c) (UnsafePointer<CChar>?, UnsafeRawPointer?, Int) -> Int32).self),
        get: get.function(
          as: (@convention(c) (
            UnsafePointer<CChar>?, UnsafeMutableRawPointer?, Int, UnsafeMutablePointer<Int>?
          )
            -> Int32).self),
        remove: remove.function(as: (@convention(c) (UnsafePointer<CChar>?) -> Int32).self)))
    return UnsafeMutableRawPointer(t)
  }
}
