import ForsettiBridge
import Testing

/// The in-place frame reader and writer of the worker call path. The host reads what a worker
/// wrote, so the reader is checked against hostile bytes and against the allocating decoder.
@Suite struct WireViewTests {
  static func written(_ fill: (inout WireWriter) -> Void, kind: WireKind = .publish, id: UInt64 = 7)
    -> [UInt8]
  {
    var out = [UInt8](repeating: 0, count: 256)
    let n = out.withUnsafeMutableBytes { buf -> Int? in
      var w = WireWriter(into: buf, kind: kind, id: id)
      fill(&w)
      return w.length
    }
    return Array(out.prefix(n ?? 0))
  }

  @Test func whatTheWriterWritesTheViewAndTheDecoderRead() throws {
    let payload: [UInt8] = [0, 1, 2, 255]
    let frame = Self.written { w in
      w.string("bench.évent")
      payload.withUnsafeBytes { w.bytes($0) }
      w.int(-42)
    }
    try frame.withUnsafeBytes { raw in
      let v = try WireView(raw)
      #expect(v.kind == .publish && v.id == 7 && v.count == 3)
      #expect(v.string(0) == "bench.évent")
      #expect(v.bytes(1).map(Array.init) == payload)
      #expect(v.int(2) == -42)
      #expect(v.int(0) == nil && v.bytes(2) == nil && v.string(3) == nil)
      let f = try Wire.decode(raw)
      #expect(f.kind == v.kind && f.id == v.id && f.string(0) == v.string(0) && f.int(2) == v.int(2))
    }
    // The same frame as the allocating encoder writes it.
    let encoded = Wire.encode(
      WireFrame(.publish, id: 7, [.string("bench.évent"), .bytes(payload), .int(-42)]))
    #expect(encoded == frame)
  }

  @Test func everyTruncationIsRefusedOrReadsOnlyWhatIsThere() throws {
    let frame = Self.written { w in
      w.string("type")
      w.int(1)
    }
    // Only a prefix ending between two values can be read: the bare header (12 bytes) and the
    // header with the string (12 + 5 + 4).
    var accepted: [Int: Int] = [:]
    for n in 0..<frame.count {
      Array(frame.prefix(n)).withUnsafeBytes { raw in
        if let view = try? WireView(raw) { accepted[n] = view.count }
      }
    }
    #expect(accepted == [12: 0, 21: 1])
  }

  @Test func lyingLengthsBadTagsAndTooManyValuesAreRefused() {
    var lying = Self.written { $0.string("abc") }
    // The length field of the first value, after the 12-byte header and the tag.
    lying.replaceSubrange(13..<17, with: [0xFF, 0xFF, 0xFF, 0x7F])
    _ = lying.withUnsafeBytes { raw in #expect(throws: Wire.DecodeError.self) { try WireView(raw) } }
    var badTag = Self.written { $0.int(5) }
    badTag[12] = 9
    _ = badTag.withUnsafeBytes { raw in #expect(throws: Wire.DecodeError.self) { try WireView(raw) } }
    let seven = Self.written { w in for i in 0..<7 { w.int(Int64(i)) } }
    _ = seven.withUnsafeBytes { raw in #expect(throws: Wire.DecodeError.self) { try WireView(raw) } }
    var unknownKind = Self.written { $0.int(5) }
    unknownKind[0] = 0xEE
    _ = unknownKind.withUnsafeBytes { raw in #expect(throws: Wire.DecodeError.self) { try WireView(raw) } }
  }

  @Test func aFrameThatDoesNotFitHasNoLength() {
    var small = [UInt8](repeating: 0, count: 20)
    let length = small.withUnsafeMutableBytes { buf -> Int? in
      var w = WireWriter(into: buf, kind: .publish, id: 1)
      w.string("a type longer than the eight bytes left")
      w.int(3)
      return w.length
    }
    #expect(length == nil)
  }

  /// Random bytes (a fixed seed), made up or flipped in a valid frame: whatever is accepted is
  /// exactly a frame (re-encoding it gives the same bytes), and nothing else is.
  @Test func whatIsAcceptedFromRandomBytesIsExactlyAFrame() {
    var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
    func next() -> UInt64 {
      seed ^= seed << 13
      seed ^= seed >> 7
      seed ^= seed << 17
      return seed
    }
    let valid = Self.written { w in
      w.string("t")
      w.int(2)
    }
    var acceptedMutations = 0
    for round in 0..<5000 {
      var bytes = valid
      if round % 5 == 0 {
        bytes = (0..<Int(next() % 40)).map { _ in UInt8(truncatingIfNeeded: next()) }
      } else {
        for _ in 0..<(1 + next() % 3) {
          bytes[Int(next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: next())
        }
      }
      bytes.withUnsafeBytes { raw in
        guard let frame = try? Wire.decode(raw) else { return }
        acceptedMutations += 1
        #expect(Wire.encode(frame) == bytes, "\(bytes)")
      }
    }
    // Flipping the value bytes of a valid frame keeps it a frame: the check above really ran.
    #expect(acceptedMutations > 100)
  }

  /// Random frames written and read back: every value returns as it went.
  @Test func randomFramesRoundTrip() throws {
    var seed: UInt64 = 42
    func next() -> UInt64 {
      seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
      return seed >> 11
    }
    for _ in 0..<500 {
      let values: [WireValue] = (0..<Int(next() % 5)).map { _ in
        next() % 2 == 0
          ? .int(Int64(bitPattern: next() << 11))
          : .bytes((0..<Int(next() % 70)).map { _ in UInt8(truncatingIfNeeded: next()) })
      }
      let frame = WireFrame(.publish, id: next(), values)
      let back = try Wire.encode(frame).withUnsafeBytes { try Wire.decode($0) }
      #expect(back.kind == frame.kind && back.id == frame.id && back.values == frame.values)
    }
  }
}
