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
    for n in 0..<frame.count {
      let prefix = Array(frame.prefix(n))
      prefix.withUnsafeBytes { raw in
        let view = try? WireView(raw)
        let decoded = try? Wire.decode(raw)
        #expect((view == nil) == (decoded == nil), "prefix of \(n) bytes")
        // Only a prefix ending between two values can be read, and then only the first ones.
        if let view { #expect(view.count < 2, "prefix of \(n) bytes read \(view.count) values") }
      }
    }
  }

  @Test func lyingLengthsBadTagsAndTooManyValuesAreRefused() {
    var lying = Self.written { $0.string("abc") }
    // The length field of the first value, after the 12-byte header and the tag.
    lying.replaceSubrange(13..<17, with: [0xFF, 0xFF, 0xFF, 0x7F])
    _ = lying.withUnsafeBytes { raw in #expect(throws: Wire.DecodeError.self) { try WireView(raw) } }
    var badTag = Self.written { $0.int(5) }
    badTag[12] = 9
    _ = badTag.withUnsafeBytes { raw in #expect(throws: Wire.DecodeError.self) { try WireView(raw) } }
    let five = Self.written { w in for i in 0..<5 { w.int(Int64(i)) } }
    _ = five.withUnsafeBytes { raw in #expect(throws: Wire.DecodeError.self) { try WireView(raw) } }
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

  /// Random bytes (a fixed seed): the view and the decoder agree on every input.
  @Test func randomBytesAreJudgedAlikeByTheViewAndTheDecoder() {
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
    for round in 0..<5000 {
      var bytes = valid
      // Flip a few bytes of a valid frame, or make it up from scratch.
      if round % 5 == 0 {
        bytes = (0..<Int(next() % 40)).map { _ in UInt8(truncatingIfNeeded: next()) }
      } else {
        for _ in 0..<(1 + next() % 3) {
          bytes[Int(next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: next())
        }
      }
      bytes.withUnsafeBytes { raw in
        let view = try? WireView(raw)
        let decoded = try? Wire.decode(raw)
        if let decoded, decoded.values.count > WireView.maxValues {
          #expect(view == nil)
          return
        }
        #expect((view == nil) == (decoded == nil), "\(bytes)")
        guard let view, let decoded else { return }
        #expect(view.kind == decoded.kind && view.id == decoded.id && view.count == decoded.values.count)
        for i in 0..<view.count {
          #expect(view.int(i) == decoded.int(i))
          #expect(view.bytes(i).map(Array.init) == decoded.bytes(i))
        }
      }
    }
  }
}
