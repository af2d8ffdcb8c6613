import CFFI
import CForsetti
import ForsettiCore

extension HostFunctions {
  /// The table of crypto utilities (forsetti/services/crypto.h); every call becomes a `ServiceRequest` the host answers.
  package static func crypto(_ b: ModuleBinding) throws(BindingError) -> UnsafeMutableRawPointer {
    // Skeleton: the service is not built yet.
    throw .closure("the service is not built yet")
  }
}
