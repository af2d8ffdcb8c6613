import CForsettiSys

/// What the crash-record fuzzer does with one input: the bytes as the shared page a worker's
/// crash handler wrote (`forsetti_crash.h`), padded or cut to a record, read as the host reads
/// it (`CrashCapture.read`). Shared by the libFuzzer target (`Fuzz/`) and its regression test.
public enum CrashRecordFuzzEntry {
  /// The properties that did not hold (none on a good run). A trap inside is a finding of its own.
  public static func run(_ input: [UInt8]) -> [String] {
    let size = MemoryLayout<forsetti_crash_record>.size
    var bytes = [UInt8](repeating: 0, count: size)
    // The input goes over the head of the record; its `state` word made valid half the time, so
    // mutations reach past the first check.
    for (i, b) in input.prefix(size).enumerated() { bytes[i] = b }
    if input.first.map({ $0 & 1 == 1 }) == true {
      withUnsafeBytes(of: FORSETTI_CRASH_WRITTEN.littleEndian) {
        for (i, b) in $0.enumerated() { bytes[i] = b }
      }
    }
    guard let c = bytes.withUnsafeBytes({ CrashCapture.read($0) }) else { return [] }
    var broken: [String] = []
    if c.stack.count > Int(FORSETTI_CRASH_STACK) { broken.append("a stack of \(c.stack.count) bytes") }
    if c.objects.count > Int(FORSETTI_CRASH_OBJECTS) { broken.append("\(c.objects.count) objects") }
    if c.registers.count != Int(FORSETTI_CRASH_REGISTERS) { broken.append("\(c.registers.count) registers") }
    for o in c.objects
    where !o.path.hasPrefix("/") || o.path.utf8.count >= Int(FORSETTI_CRASH_PATH) || o.path.contains("\0") {
      broken.append("object path \(o.path.debugDescription)")
    }
    if c.signal <= 0 || c.signal >= 65 { broken.append("signal \(c.signal)") }
    return broken
  }
}
