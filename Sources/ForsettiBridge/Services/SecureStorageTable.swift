import CFFI
import CForsetti
import ForsettiCore

extension HostFunctions {
  /// The table of secure storage (forsetti/services/secure_storage.h); every call becomes a `ServiceRequest` the host answers.
  package static func secureStorage(_ b: ModuleBinding) throws(BindingError) -> UnsafeMutableRawPointer {
    // Skeleton: the service is not built yet.
    throw .closure("the service is not built yet")
  }
}
