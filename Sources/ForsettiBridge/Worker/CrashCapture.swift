import CForsettiSys

/// What a worker's crash handler wrote (`forsetti_crash.h`), copied out of the memory the host
/// shares with it and checked: a worker is the module's process, so every field is its word — a
/// count past its array, a path without its end, a stack longer than the room for it are
/// refused or cut here, once, before anything reads them.
package struct CrashCapture: Sendable, Hashable {
  package var signal: Int32
  package var code: Int32
  package var address: UInt64
  /// x86-64's DWARF registers 0–16 (rip last).
  package var registers: [UInt64]
  package var stackStart: UInt64
  package var stack: [UInt8]
  /// What was loaded where when the module was.
  package var objects: [Object]

  /// One loaded object: its load bias and its path, as the worker named it.
  package struct Object: Sendable, Hashable {
    package var bias: UInt64
    package var path: String
  }

  /// The program counter where the signal struck.
  package var pc: UInt64 { registers.count == Int(FORSETTI_CRASH_REGISTERS) ? registers[16] : 0 }

  /// The record in `bytes` (a whole `forsetti_crash_record`), or nil when the handler never
  /// wrote one (no crash it saw, another architecture) or what it holds cannot be a record.
  package static func read(_ bytes: UnsafeRawBufferPointer) -> CrashCapture? {
    guard bytes.count >= MemoryLayout<forsetti_crash_record>.size, let base = bytes.baseAddress else {
      return nil
    }
    var r = forsetti_crash_record()
    withUnsafeMutableBytes(of: &r) {
      $0.copyMemory(from: UnsafeRawBufferPointer(start: base, count: $0.count))
    }
    guard r.state == FORSETTI_CRASH_WRITTEN, r.signo > 0, r.signo < 65 else { return nil }
    let registers = withUnsafeBytes(of: r.registers) { Array($0.bindMemory(to: UInt64.self)) }
    let stackAt = forsetti_crash_stack_offset()
    let stackLength = Int(min(r.stack_length, UInt32(FORSETTI_CRASH_STACK)))
    let stack = Array(bytes[stackAt..<(stackAt + stackLength)])
    var objects: [Object] = []
    do {
      let objectsAt = forsetti_crash_objects_offset()
      let size = MemoryLayout<forsetti_crash_object>.stride
      let all = UnsafeRawBufferPointer(
        rebasing: bytes[objectsAt..<(objectsAt + size * Int(FORSETTI_CRASH_OBJECTS))])
      for i in 0..<Int(min(r.object_count, UInt32(FORSETTI_CRASH_OBJECTS))) {
        let entry = UnsafeRawBufferPointer(rebasing: all[(i * size)..<((i + 1) * size)])
        let bias = entry.loadUnaligned(as: UInt64.self)
        let pathBytes = entry[8..<(8 + Int(FORSETTI_CRASH_PATH))]
        // A path is up to its NUL; one without is no path.
        guard let end = pathBytes.firstIndex(of: 0), end > pathBytes.startIndex else { continue }
        guard let path = String(validating: pathBytes[pathBytes.startIndex..<end], as: UTF8.self),
          path.hasPrefix("/")
        else { continue }
        objects.append(Object(bias: bias, path: path))
      }
    }
    return CrashCapture(
      signal: Int32(r.signo), code: r.code, address: r.address, registers: registers,
      stackStart: r.stack_start,
      stack: stack, objects: objects)
  }
}
