import CFFI
import CForsetti
import ForsettiCore

extension HostFunctions {
  /// The table of file export (forsetti/services/file_export.h); every call becomes a `ServiceRequest` the host answers.
  package static func fileExport(_ b: ModuleBinding) throws(BindingError) -> UnsafeMutableRawPointer {
    // Skeleton: the service is not built yet.
    throw .closure("the service is not built yet")
  }
}
