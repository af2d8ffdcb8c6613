import Glibc

/// A frame read in place: the kind, the ID and where each value lies in the bytes, without
/// copying a value out. Built only from bytes that were checked to be a whole, well-formed
/// frame, so every accessor reads within them. The call path of a worker uses it on both sides
/// so that a host call allocates nothing for its framing.
package struct WireView {
  package let kind: WireKind
  package let id: UInt64
  private let bytes: UnsafeRawBufferPointer
  /// Up to six values (no frame has more); offset of the tag of each.
  private var offsets: (Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0)
  package private(set) var count = 0

  package static let maxValues = 6

  /// Checks `bytes` as a frame: known kind, each value's tag and length within the bytes, at
  /// most `maxValues` values.
  package init(_ bytes: UnsafeRawBufferPointer) throws(Wire.DecodeError) {
    guard bytes.count >= 12, let base = bytes.baseAddress else { throw .short }
    let raw = UInt32(littleEndian: base.loadUnaligned(as: UInt32.self))
    guard let kind = WireKind(rawValue: raw) else { throw .unknownKind(raw) }
    self.kind = kind
    id = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: 4, as: UInt64.self))
    self.bytes = bytes
    var pos = 12
    while pos < bytes.count {
      guard count < Self.maxValues else { throw .tooManyValues }
      let tag = bytes[pos]
      switch tag {
      case 1:
        guard pos + 9 <= bytes.count else { throw .short }
        set(count, pos)
        pos += 9
      case 2:
        guard pos + 5 <= bytes.count else { throw .short }
        let n = Int(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: pos + 1, as: UInt32.self)))
        guard n <= bytes.count - pos - 5 else { throw .short }
        set(count, pos)
        pos += 5 + n
      default: throw .badTag(tag)
      }
      count += 1
    }
  }

  private mutating func set(_ i: Int, _ offset: Int) {
    switch i {
    case 0: offsets.0 = offset
    case 1: offsets.1 = offset
    case 2: offsets.2 = offset
    case 3: offsets.3 = offset
    case 4: offsets.4 = offset
    default: offsets.5 = offset
    }
  }

  private func offset(_ i: Int) -> Int? {
    guard i >= 0, i < count else { return nil }
    switch i {
    case 0: return offsets.0
    case 1: return offsets.1
    case 2: return offsets.2
    case 3: return offsets.3
    case 4: return offsets.4
    default: return offsets.5
    }
  }

  package func int(_ i: Int) -> Int64? {
    guard let at = offset(i), bytes[at] == 1, let base = bytes.baseAddress else { return nil }
    return Int64(
      bitPattern: UInt64(littleEndian: base.loadUnaligned(fromByteOffset: at + 1, as: UInt64.self)))
  }

  /// The bytes of value `i`, in place: valid only as long as the frame's bytes are.
  package func bytes(_ i: Int) -> UnsafeRawBufferPointer? {
    guard let at = offset(i), bytes[at] == 2, let base = bytes.baseAddress else { return nil }
    let n = Int(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: at + 1, as: UInt32.self)))
    return UnsafeRawBufferPointer(start: base + at + 5, count: n)
  }

  /// A string value, if present and valid UTF-8.
  package func string(_ i: Int) -> String? { bytes(i).flatMap(Wire.text) }
}

/// Writes one frame into a buffer the caller owns (the call ring's slot), without building the
/// frame as values first. Every put checks the room left; `length` is nil once one did not fit.
package struct WireWriter {
  private let buffer: UnsafeMutableRawBufferPointer
  private var position = 0
  private var overflowed = false

  package init(into buffer: UnsafeMutableRawBufferPointer, kind: WireKind, id: UInt64) {
    self.buffer = buffer
    put(kind.rawValue)
    put(id)
  }

  /// The frame's length, or nil if it did not fit.
  package var length: Int? { overflowed ? nil : position }

  private mutating func room(_ n: Int) -> UnsafeMutableRawPointer? {
    guard !overflowed, n <= buffer.count - position, let base = buffer.baseAddress else {
      overflowed = true
      return nil
    }
    defer { position += n }
    return base + position
  }

  private mutating func put<T: FixedWidthInteger>(_ v: T) {
    room(MemoryLayout<T>.size)?.storeBytes(of: v.littleEndian, as: T.self)
  }

  package mutating func int(_ v: Int64) {
    put(UInt8(1))
    put(UInt64(bitPattern: v))
  }

  package mutating func bytes(_ b: UnsafeRawBufferPointer) {
    guard b.count <= Int(UInt32.max) else {
      overflowed = true
      return
    }
    put(UInt8(2))
    put(UInt32(b.count))
    if let dst = room(b.count), let src = b.baseAddress { dst.copyMemory(from: src, byteCount: b.count) }
  }

  package mutating func string(_ s: String) {
    var s = s
    s.withUTF8 { bytes(UnsafeRawBufferPointer($0)) }
  }
}
