import ForsettiBinary
import ForsettiTestSupport
import Foundation
import Testing

/// Hand-crafted ELF headers whose numbers lie: each must give an error, not a trap or a hang.
@Suite struct CraftedELFTests {
  let dir = TemporaryDirectory("crafted")

  func base() throws -> [UInt8] {
    let so = try CFixture.sharedObject("base.so", source: "int base_entry(void) { return 0; }\n", in: dir)
    return [UInt8](try Data(contentsOf: URL(fileURLWithPath: so)))
  }

  static func put(_ bytes: inout [UInt8], _ value: UInt64, at offset: Int, width: Int = 8) {
    for i in 0..<width { bytes[offset + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(i))) }
  }

  static func read(_ bytes: [UInt8], _ offset: Int, width: Int) -> Int {
    (0..<width).reduce(0) { $0 | Int(bytes[offset + $1]) << (8 * $1) }
  }

  @Test func aSectionTableOffsetNearTwoToTheSixtyFourIsTruncated() throws {
    var b = try base()
    Self.put(&b, UInt64.max - 8, at: 0x28)  // e_shoff
    let path = try dir.write("shoff.so", bytes: b)
    guard case .failure(.truncated) = ELFInspector.inspect(path) else {
      Issue.record("accepted an impossible section table offset")
      return
    }
  }

  @Test func aSectionOffsetNearTwoToTheSixtyFourIsTruncated() throws {
    var b = try base()
    let shoff = Self.read(b, 0x28, width: 8)
    Self.put(&b, UInt64.max - 0x0F, at: shoff + 64 + 0x18)  // section 1's sh_offset
    let path = try dir.write("shoffset.so", bytes: b)
    guard case .failure = ELFInspector.inspect(path) else {
      Issue.record("accepted an impossible section offset")
      return
    }
  }

  @Test func everyHeaderByteFlippedNeverCrashes() throws {
    let b = try base()
    // The ELF header and the whole section header table: the numbers a crafted file lies with.
    let shoff = Self.read(b, 0x28, width: 8)
    let offsets = Array(0..<64) + Array(shoff..<b.count)
    for (n, offset) in offsets.enumerated() where n % 3 == 0 {
      var c = b
      c[offset] ^= 0xFF
      let path = try dir.write("flip.so", bytes: c)
      _ = ELFInspector.inspect(path)
    }
  }

  @Test func aFIFONamedLikeAModuleDoesNotBlock() throws {
    let path = dir.url("pipe.so")
    try #require(mkfifo(path, 0o644) == 0)
    guard case .failure(.unreadable(_, let why)) = ELFInspector.inspect(path) else {
      Issue.record("a FIFO was inspected")
      return
    }
    #expect(why.contains("not a regular file"))
    let index = BinaryIndex.build(directories: [dir.path])
    #expect(index.failures.count == 1)
  }
}
