import CFFI
import CForsetti
import ForsettiBinary
import ForsettiCore
import Glibc

extension HostFunctions {
  /// Set in an `exportWrite` request's number, beside the flags, when the module passed a
  /// buffer for the final path: with none the host neither checks nor sends the path.
  package static let exportWantsPath: Int64 = 1 << 32

  /// Longest `file_name` a module may pass: a whole path is accepted, only its last component
  /// is used (the component itself is checked against FORSETTI_FILE_EXPORT_MAX_NAME by the host).
  package static let maxExportInput = Int(FORSETTI_FILE_EXPORT_MAX_PATH)

  /// The table of file export (forsetti/services/file_export.h); every call becomes a
  /// `ServiceRequest` the host answers, so a worker's module is served by the host itself.
  package static func fileExport(_ b: ModuleBinding) throws(BindingError) -> UnsafeMutableRawPointer {
    let write = try closure(
      [FFIType.pointer, FFIType.pointer, FFIType.size, FFIType.uint32, FFIType.pointer, FFIType.size],
      FFIType.int32
    ) { a in
      guard !b.isRevoked else { return revoked }
      // Raw bytes: the host judges the name (UTF-8, characters) and tells the operator why.
      guard let p = a.cString(0), let name = rawName(p) else { return invalid }
      guard a.size(2) <= Int(FORSETTI_FILE_EXPORT_MAX_DATA) else { return .int32(FORSETTI_ERR_TOO_LARGE) }
      guard let data = buffer(a, 1, 2) else { return invalid }
      let out = a.pointer(4)
      // A capacity without a buffer is a mistake the module should hear of, not a silent drop.
      guard out != nil || a.size(5) == 0 else { return invalid }
      let capacity = out == nil ? 0 : min(a.size(5), Int(FORSETTI_FILE_EXPORT_MAX_PATH))
      let number = Int64(a.uint32(3)) | (out == nil ? 0 : exportWantsPath)
      let reply = b.backend.service(
        ServiceRequest(.exportWrite, capacity: capacity, number: number, [name, Array(data)]),
        from: b.caller)
      return .int32(reply.deliver(into: out, capacity: capacity, length: nil))
    }
    typealias Write =
      @convention(c) (
        UnsafePointer<CChar>?, UnsafeRawPointer?, Int, UInt32, UnsafeMutablePointer<CChar>?, Int
      ) -> Int32
    let t = UnsafeMutablePointer<forsetti_file_export>.allocate(capacity: 1)
    t.initialize(
      to: forsetti_file_export(
        struct_size: UInt32(MemoryLayout<forsetti_file_export>.size), write: write.function(as: Write.self)))
    return UnsafeMutableRawPointer(t)
  }

  /// The bytes of the C string at `p`, nil when longer than `maxExportInput`.
  static func rawName(_ p: UnsafePointer<CChar>) -> [UInt8]? {
    let n = strnlen(p, maxExportInput + 1)
    guard n <= maxExportInput else { return nil }
    return p.withMemoryRebound(to: UInt8.self, capacity: n) {
      Array(UnsafeBufferPointer(start: $0, count: n))
    }
  }
}
