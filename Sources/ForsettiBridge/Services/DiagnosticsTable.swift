import CFFI
import CForsetti
import ForsettiCore

extension HostFunctions {
  /// The table of diagnostics (forsetti/services/diagnostics.h); every call becomes a `ServiceRequest` the host answers.
  package static func diagnostics(_ b: ModuleBinding) throws(BindingError) -> UnsafeMutableRawPointer {
    // Skeleton: the service is not built yet.
    throw .closure("the service is not built yet")
  }
}
