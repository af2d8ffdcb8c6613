import ForsettiBinary
import ForsettiTestSupport
import Foundation
import Testing

/// Hand-crafted ELF headers whose numbers lie: each must give an error, not a trap or a hang.
@Suite(.onTestThreads) struct CraftedELFTests {
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

  /// A copy of a real module with versioned exports, so every table the inspector reads is there.
  func versioned() throws -> ELFBytes {
    try dir.write("src/v.map", "V1 { global: v_entry; local: *; };\nV2 { global: v_entry; } V1;\n")
    let so = try CFixture.sharedObject(
      "v.so",
      source: """
        int v_old(void) { return 1; }
        int v_new(void) { return 2; }
        __asm__(".symver v_old, v_entry@V1");
        __asm__(".symver v_new, v_entry@@V2");
        """, in: dir,
      extraFlags: ["-Wl,--version-script," + dir.url("src/v.map"), "-Wl,--no-as-needed", "-lm"])
    return ELFBytes(bytes: [UInt8](try Data(contentsOf: URL(fileURLWithPath: so))))
  }

  /// Inspects `file` and returns the error, recording an issue when it was accepted.
  func rejected(_ file: ELFBytes, _ name: String) throws -> BinaryError? {
    let path = try dir.write(name, bytes: file.bytes)
    switch ELFInspector.inspect(path) {
    case .success:
      Issue.record("\(name) was accepted")
      return nil
    case .failure(let e):
      #expect(e.path == path)
      return e
    }
  }

  @Test(arguments: [UInt64(1) << 63, UInt64.max, UInt64(Int64.max), 0, 1, 7])
  func aDynsymEntrySizeThatIsNotASymbolIsMalformed(entsize: UInt64) throws {
    var b = try versioned()
    let s = try #require(b.section(ofType: ELFBytes.dynsym))
    b.set(.entsize, of: s, to: entsize)
    guard case .malformed(_, let detail) = try rejected(b, "dynsym-entsize.so") else {
      Issue.record("expected malformed")
      return
    }
    #expect(detail.contains(".dynsym") && detail.contains(String(entsize)), "\(detail)")
  }

  @Test(arguments: [UInt64(1) << 63, UInt64.max, 0, 3])
  func aDynamicEntrySizeThatIsNotAnEntryIsMalformed(entsize: UInt64) throws {
    var b = try versioned()
    let s = try #require(b.section(ofType: ELFBytes.dynamic))
    b.set(.entsize, of: s, to: entsize)
    guard case .malformed(_, let detail) = try rejected(b, "dynamic-entsize.so") else {
      Issue.record("expected malformed")
      return
    }
    #expect(detail.contains(".dynamic") && detail.contains(String(entsize)), "\(detail)")
  }

  @Test(arguments: [UInt64.max, UInt64(1) << 63, UInt64(Int64.max) - 3])
  func aStringTableReachingPastTheFileIsTruncated(size: UInt64) throws {
    // .dynstr comes after .dynsym in the section table: its bounds must be checked before the
    // symbols are read through it.
    var b = try versioned()
    let dynsym = try #require(b.section(ofType: ELFBytes.dynsym))
    let strings = Int(b.field(.link, of: dynsym))
    b.set(.size, of: strings, to: size)
    guard case .truncated = try rejected(b, "dynstr-size.so") else {
      Issue.record("expected truncated")
      return
    }
  }

  @Test(arguments: [UInt32.max, 0x7FFF_FFFF, 0xFFFF])
  func aLinkToASectionThatDoesNotExistIsMalformed(link: UInt32) throws {
    var b = try versioned()
    let dynsym = try #require(b.section(ofType: ELFBytes.dynsym))
    b.set(.link, of: dynsym, to: UInt64(link))
    guard case .malformed(_, let detail) = try rejected(b, "dynsym-link.so") else {
      Issue.record("expected malformed")
      return
    }
    #expect(detail.contains("section \(link)"), "\(detail)")
  }

  @Test func aVersionTableShorterThanTheSymbolTableIsMalformed() throws {
    var b = try versioned()
    let s = try #require(b.section(ofType: ELFBytes.versym))
    b.set(.size, of: s, to: 4)
    guard case .malformed(_, let detail) = try rejected(b, "versym-short.so") else {
      Issue.record("expected malformed")
      return
    }
    #expect(detail.contains(".gnu.version"), "\(detail)")
  }

  @Test(arguments: [UInt64(1) << 63, 0, 1, 4])
  func aVersionTableEntrySizeThatIsNotTwoIsMalformed(entsize: UInt64) throws {
    var b = try versioned()
    let s = try #require(b.section(ofType: ELFBytes.versym))
    b.set(.entsize, of: s, to: entsize)
    guard case .malformed(_, let detail) = try rejected(b, "versym-entsize.so") else {
      Issue.record("expected malformed")
      return
    }
    #expect(detail.contains(".gnu.version") && detail.contains(String(entsize)), "\(detail)")
  }

  /// The Elf64_Verdef fields: vd_aux at 12, vd_next at 16 (4 bytes each). A definition
  /// pointing its names or its successor anywhere but into the section is malformed.
  @Test(arguments: [(12, UInt64(UInt32.max)), (16, UInt64(UInt32.max)), (16, 1), (12, 0x7FFF_FFF0)])
  func aVersionDefinitionPointingAnywhereIsAnErrorNotATrap(field: Int, value: UInt64) throws {
    var b = try versioned()
    let s = try #require(b.section(ofType: ELFBytes.verdef))
    // The second definition (V1), so the walk has started when it meets the lie.
    let first = b.contents(of: s).lowerBound
    let second = first + Int(b.read(first + 16, width: 4))
    b.put(value, at: second + field, width: 4)
    let path = try dir.write("verdef.so", bytes: b.bytes)
    guard case .failure(let e) = ELFInspector.inspect(path) else {
      Issue.record("accepted a .gnu.version_d whose field at \(field) says \(value)")
      return
    }
    #expect(e.description.contains(".gnu.version_d"), "\(e)")
  }

  /// vd_cnt (2 bytes at 6) counts a definition's names; only the first is its version's name,
  /// so a huge count is read as far as the names go and the file still reads.
  @Test func aHugeVersionNameCountStillReadsTheFirstName() throws {
    var b = try versioned()
    let s = try #require(b.section(ofType: ELFBytes.verdef))
    let first = b.contents(of: s).lowerBound
    let second = first + Int(b.read(first + 16, width: 4))
    b.put(0xFFFF, at: second + 6, width: 2)
    let facts = try ELFInspector.inspect(try dir.write("verdef-cnt.so", bytes: b.bytes)).get()
    #expect(facts.exportedFunctions.contains("v_entry"))
  }

  @Test func aVersionNameOutsideItsStringTableIsMalformed() throws {
    var b = try versioned()
    let s = try #require(b.section(ofType: ELFBytes.verdef))
    let first = b.contents(of: s).lowerBound
    let aux = first + Int(b.read(first + 12, width: 4))
    b.put(UInt64(UInt32.max), at: aux, width: 4)
    guard case .malformed(_, let detail) = try rejected(b, "verdaux-name.so") else {
      Issue.record("expected malformed")
      return
    }
    #expect(detail.contains(".gnu.version_d"), "\(detail)")
  }

  @Test(arguments: [UInt64.max, UInt64(1) << 63])
  func aHugeSectionSizeOrOffsetAnywhereIsTruncated(value: UInt64) throws {
    let b = try versioned()
    for type in [ELFBytes.dynsym, ELFBytes.dynamic, ELFBytes.versym, ELFBytes.verdef] {
      let s = try #require(b.section(ofType: type))
      for f in [ELFBytes.Field.size, .offset] {
        var c = b
        c.set(f, of: s, to: value)
        guard case .truncated = try rejected(c, "huge-\(type)-\(f).so") else {
          Issue.record("type \(type) \(f): expected truncated")
          continue
        }
      }
    }
  }

  @Test func aSectionCountBeyondTheFileIsTruncated() throws {
    var b = try versioned()
    b.put(0xFFFF, at: 0x3C, width: 2)  // e_shnum
    guard case .truncated(_, let detail) = try rejected(b, "shnum.so") else {
      Issue.record("expected truncated")
      return
    }
    #expect(detail.contains("65535 headers"), "\(detail)")
  }

  @Test(arguments: [UInt64(0), 1, 63, 65, 0xFFFF])
  func aSectionHeaderSizeThatIsNotTheClasssIsMalformed(size: UInt64) throws {
    var b = try versioned()
    b.put(size, at: 0x3A, width: 2)  // e_shentsize
    guard case .malformed(_, let detail) = try rejected(b, "shentsize.so") else {
      Issue.record("expected malformed")
      return
    }
    #expect(detail.contains("e_shentsize"), "\(detail)")
  }

  @Test func aLargeFileReadOnDemandGetsTheSameChecks() throws {
    // Past FileImage's read limit libelf reads with pread instead of one read into memory.
    let so = try CFixture.sharedObject(
      "big.so",
      source:
        "__attribute__((used)) static const char pad[400000] = {1};\nint big_entry(void) { return pad[0]; }\n",
      in: dir)
    let good = ELFBytes(bytes: [UInt8](try Data(contentsOf: URL(fileURLWithPath: so))))
    try #require(good.bytes.count > 1 << 18)
    #expect(try ELFInspector.inspect(so).get().exportedFunctions.contains("big_entry"))
    var huge = good
    let dynsym = try #require(huge.section(ofType: ELFBytes.dynsym))
    huge.set(.entsize, of: dynsym, to: 1 << 63)
    guard case .malformed(_, let detail) = try rejected(huge, "big-entsize.so") else {
      Issue.record("expected malformed")
      return
    }
    #expect(detail.contains(".dynsym"))
    let cut = ELFBytes(bytes: Array(good.bytes.prefix(good.bytes.count - 100)))
    guard case .truncated = try rejected(cut, "big-cut.so") else {
      Issue.record("expected truncated")
      return
    }
    let text = try dir.write("big-text.so", bytes: [UInt8](repeating: 0x41, count: 1 << 19))
    guard case .failure(.notELF(_, let head)) = ELFInspector.inspect(text) else {
      Issue.record("expected not ELF")
      return
    }
    #expect(head == "41 41 41 41")
  }

  @Test(arguments: [false, true])
  func anExtendedSectionCountOfBillionsIsRefusedWithoutAllocatingIt(large: Bool) throws {
    // e_shnum 0 means "the count is section 0's sh_size": a 4-byte lie claiming 2^32 headers.
    let source =
      large
      ? "__attribute__((used)) static const char pad[400000] = {1};\nint x_entry(void) { return pad[0]; }\n"
      : "int x_entry(void) { return 0; }\n"
    let so = try CFixture.sharedObject(large ? "xbig.so" : "xsmall.so", source: source, in: dir)
    var b = ELFBytes(bytes: [UInt8](try Data(contentsOf: URL(fileURLWithPath: so))))
    b.put(0, at: 0x3C, width: 2)
    b.set(.size, of: 0, to: UInt64(UInt32.max))
    guard case .failure(let e) = ELFInspector.inspect(try dir.write("xcount.so", bytes: b.bytes)) else {
      Issue.record("accepted 2^32 section headers")
      return
    }
    #expect(e.description.contains("no readable headers (e_shnum 0)"), "\(e)")
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
