import CFFI
import CForsetti
import ForsettiBinary
import ForsettiCore
import Glibc

extension HostFunctions {
  /// The table of diagnostics (forsetti/services/diagnostics.h); every call becomes a
  /// `ServiceRequest` the host answers (and checks again: a worker's frame is not trusted).
  package static func diagnostics(_ b: ModuleBinding) throws(BindingError) -> UnsafeMutableRawPointer {
    let maxSummary = Int(FORSETTI_DIAGNOSTICS_MAX_SUMMARY)
    let report = try closure([FFIType.int32, FFIType.pointer], FFIType.int32) { a in
      guard !b.isRevoked else { return revoked }
      var summary: [[UInt8]] = []
      if let p = a.cString(1) {
        guard strnlen(p, maxSummary + 1) <= maxSummary else { return .int32(FORSETTI_ERR_TOO_LARGE) }
        guard let text = CString.read(p, max: maxSummary) else { return invalid }
        summary = [Array(text.utf8)]
      }
      return .int32(
        b.backend.service(
          ServiceRequest(.diagnosticsReport, number: Int64(a.int32(0)), summary), from: b.caller
        ).status)
    }
    let counter = try closure([FFIType.pointer, FFIType.int64], FFIType.int32) { a in
      guard !b.isRevoked else { return revoked }
      let maxName = Int(FORSETTI_DIAGNOSTICS_MAX_COUNTER_NAME)
      guard let p = a.cString(0), let name = CString.read(p, max: maxName) else { return invalid }
      return .int32(
        b.backend.service(
          ServiceRequest(.diagnosticsCounter, number: a.int64(1), [Array(name.utf8)]), from: b.caller
        ).status)
    }
    let t = UnsafeMutablePointer<forsetti_diagnostics>.allocate(capacity: 1)
    t.initialize(
      to: forsetti_diagnostics(
        struct_size: UInt32(MemoryLayout<forsetti_diagnostics>.size),
        report: report.function(as: (@convention(c) (Int32, UnsafePointer<CChar>?) -> Int32).self),
        set_counter: counter.function(as: (@convention(c) (UnsafePointer<CChar>?, Int64) -> Int32).self)))
    return UnsafeMutableRawPointer(t)
  }
}
