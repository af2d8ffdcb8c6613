import CForsetti
import Glibc

/// The optional save/restore pair of the module table (hot reload), called at the C boundary.
package enum StateTransfer {
  /// Largest state a module may hand over.
  package static let maxState = 16 << 20

  package final class Sink {
    var bytes: [UInt8] = []
    var calls = 0
  }

  private static let writer: forsetti_state_writer = { context, bytes, length in
    guard let context else { return FORSETTI_ERR_INVALID_ARGUMENT }
    let sink = Unmanaged<Sink>.fromOpaque(context).takeUnretainedValue()
    sink.calls += 1
    let n = Int(clamping: UInt(bitPattern: length))
    guard sink.calls == 1 else { return FORSETTI_ERR_INVALID_ARGUMENT }
    guard n <= maxState else { return FORSETTI_ERR_TOO_LARGE }
    if n > 0, let bytes { sink.bytes = Array(UnsafeRawBufferPointer(start: bytes, count: n)) }
    return FORSETTI_OK
  }

  /// The module's saved state: nil when it has no `save_state` (or it failed), else its bytes.
  package static func save(_ table: UnsafePointer<forsetti_module>) -> [UInt8]? {
    let t = table.pointee
    guard Int(t.struct_size) >= MemoryLayout<forsetti_module>.size, let save = t.save_state else {
      return nil
    }
    let sink = Sink()
    let status = withExtendedLifetime(sink) {
      save(t.`self`, writer, Unmanaged.passUnretained(sink).toOpaque())
    }
    return status == FORSETTI_OK ? sink.bytes : nil
  }

  /// Hands `state` to the new instance; false when it has no `restore_state` or refused.
  @discardableResult
  package static func restore(_ table: UnsafePointer<forsetti_module>, _ state: [UInt8]) -> Bool {
    let t = table.pointee
    guard Int(t.struct_size) >= MemoryLayout<forsetti_module>.size, let restore = t.restore_state else {
      return false
    }
    return state.withUnsafeBytes { restore(t.`self`, $0.baseAddress, $0.count) } == FORSETTI_OK
  }
}
