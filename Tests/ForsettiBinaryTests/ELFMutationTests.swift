import ForsettiBinary
import ForsettiTestSupport
import Foundation
import Testing

/// A few thousand seeded mutations of one real module, each inspected in this process: any
/// trap ends the test run, and every answer must be a usable result.
@Suite(.onTestThreads) struct ELFMutationTests {
  let dir = TemporaryDirectory("mutate")

  /// SplitMix64: the same seed gives the same mutations on every machine.
  struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
      state &+= 0x9E37_79B9_7F4A_7C15
      var z = state
      z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
      z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
      return z ^ (z >> 31)
    }
  }

  /// A module with every table the inspector reads: versions, DT_NEEDED, an embedded manifest.
  func base() throws -> ELFBytes {
    let map = try dir.write(
      "src/m.map", "V1 { global: m_entry; local: *; };\nV2 { global: m_entry; m_other; } V1;\n")
    let so = try CFixture.sharedObject(
      "m.so",
      source: """
        __attribute__((section(".forsetti.manifest"), used)) static const char m[] = "{\\"moduleID\\":\\"com.m\\"}";
        extern double cos(double);
        int m_old(void) { return 1; }
        int m_new(void) { return (int)cos(0.0); }
        int m_other(void) { return 3; }
        __asm__(".symver m_old, m_entry@V1");
        __asm__(".symver m_new, m_entry@@V2");
        """, in: dir, extraFlags: ["-Wl,--version-script," + map, "-Wl,--no-as-needed", "-lm"])
    return ELFBytes(bytes: [UInt8](try Data(contentsOf: URL(fileURLWithPath: so))))
  }

  static func interesting(_ size: Int, _ rng: inout SplitMix) -> UInt64 {
    let values: [UInt64] = [
      0, 1, 2, 3, 7, 8, 24, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF, 1 << 63,
      UInt64.max, UInt64(Int64.max), UInt64(size), UInt64(size) - 1, UInt64(size) + 1, UInt64.max - 7,
    ]
    return rng.next() % 4 == 0 ? rng.next() : values[Int(rng.next() % UInt64(values.count))]
  }

  /// One mutation of `b`, chosen by `rng`: flipped bytes, a lying header field, a lying table
  /// entry, or a cut.
  static func mutate(_ b: ELFBytes, _ rng: inout SplitMix) -> [UInt8] {
    var c = b
    let size = b.bytes.count
    let widths = [1, 2, 4, 8]
    switch rng.next() % 5 {
    case 0:
      for _ in 0...(rng.next() % 4) {
        c.bytes[Int(rng.next() % UInt64(size))] ^= UInt8(truncatingIfNeeded: rng.next() | 1)
      }
    case 1:
      let width = widths[Int(rng.next() % 4)]
      let at = 0x10 + Int(rng.next() % UInt64(0x40 - 0x10 - width + 1))
      c.put(interesting(size, &rng), at: at, width: width)
    case 2:
      let fields: [ELFBytes.Field] = [.name, .type, .offset, .size, .link, .info, .entsize]
      // Half the time one of the tables the inspector reads, where lies do the most harm.
      let tables = [ELFBytes.dynsym, ELFBytes.dynamic, ELFBytes.versym, ELFBytes.verdef, ELFBytes.verneed]
        .compactMap(b.section)
      let s =
        rng.next() % 2 == 0 || tables.isEmpty
        ? Int(rng.next() % UInt64(b.sectionCount)) : tables[Int(rng.next() % UInt64(tables.count))]
      c.set(fields[Int(rng.next() % UInt64(fields.count))], of: s, to: interesting(size, &rng))
    case 3:
      let types = [
        ELFBytes.dynsym, ELFBytes.dynamic, ELFBytes.versym, ELFBytes.verdef, ELFBytes.verneed,
        ELFBytes.strtab,
      ]
      guard let s = b.section(ofType: types[Int(rng.next() % UInt64(types.count))]) else { break }
      let range = b.contents(of: s)
      let width = widths[Int(rng.next() % 4)]
      guard range.count > width else { break }
      let at = range.lowerBound + Int(rng.next() % UInt64(range.count - width)) / width * width
      c.put(interesting(size, &rng), at: at, width: width)
    default:
      c.bytes = Array(c.bytes.prefix(Int(rng.next() % UInt64(size))))
    }
    return c.bytes
  }

  @Test func thousandsOfMutationsGiveAnAnswerNeverATrap() throws {
    let b = try base()
    var rng = SplitMix(state: 0x466F_7273_6574_7469)
    var accepted = 0
    var refused = 0
    // The lie that trapped before: an entry size of .dynsym or .dynamic at or past 2^63.
    let entsizes = try [ELFBytes.dynsym, ELFBytes.dynamic].map {
      b.header(try #require(b.section(ofType: $0))) + ELFBytes.Field.entsize.rawValue
    }
    var hugeEntsizes = 0
    for n in 0..<3000 {
      let path = "mutant-\(n).so"
      let mutant = Self.mutate(b, &rng)
      hugeEntsizes +=
        entsizes.filter { $0 + 8 <= mutant.count && ELFBytes(bytes: mutant).read($0, width: 8) >= 1 << 63 }
        .count
      switch ELFInspector.inspect(contents: mutant, path: path) {
      case .success(let facts):
        accepted += 1
        // Everything a command shows of an accepted file must be computable.
        _ = facts.exportedFunctions
        _ = facts.dynamicSymbols.map(\.entryPointProblem)
        _ = facts.symbolTable.entryPointProblem(named: "m_entry")
        for need in facts.symbolTable.versionNeeds {
          for v in need.versions { _ = facts.symbolTable.symbols(needing: v.index) }
        }
      case .failure(let e):
        refused += 1
        #expect(e.path == path)
        #expect(e.description.hasPrefix(path + ": "))
      }
    }
    // The mutations must reach both outcomes, or they test nothing.
    #expect(accepted > 300 && refused > 300, "accepted \(accepted), refused \(refused)")
    #expect(hugeEntsizes > 0)
  }

  @Test func theUnmutatedBaseIsReadFully() throws {
    let facts = try ELFInspector.inspect(contents: try base().bytes, path: "m.so").get()
    #expect(facts.exportedFunctions.sorted() == ["m_entry", "m_other"])
    #expect(facts.neededLibraries.contains("libm.so.6"))
    #expect(facts.embeddedManifest.map { String(decoding: $0, as: UTF8.self) } == #"{"moduleID":"com.m"}"#)
  }

  /// `.gnu.version_r` lying (issue 41's reader): an entry's next, its first record and its file
  /// name each pointed past what holds them is refused naming the section and the number that
  /// lies, never read out of bounds; the control, the base as built, reads its GLIBC need.
  @Test func aLyingVersionNeedIsRefusedSayingWhere() throws {
    let b = try base()
    let need = try #require(b.section(ofType: ELFBytes.verneed))
    let start = b.contents(of: need).lowerBound
    let size = UInt64(b.contents(of: need).count)
    let facts = try ELFInspector.inspect(contents: b.bytes, path: "m.so").get()
    #expect(
      facts.symbolTable.versionNeeds.contains { n in n.versions.contains { $0.name.hasPrefix("GLIBC_") } },
      "\(facts.symbolTable.versionNeeds)")
    // (field offset in Elf64_Verneed, width): vn_file 4, vn_aux 8, vn_next 12.
    for (at, width, lie) in [(4, 4, UInt64(0xFFFF_FFF0)), (8, 4, size + 64), (12, 4, size + 64)] {
      var c = b
      c.put(lie, at: start + at, width: width)
      switch ELFInspector.inspect(contents: c.bytes, path: "m.so") {
      case .success(let f):
        // The first entry's file and aux are always read: their lies must be refused. Its vn_next
        // is followed only when the section says more entries come; unfollowed, the needs read
        // are exactly the file's.
        #expect(at == 12, "offset \(at): a lie of the first entry stood")
        #expect(
          f.symbolTable.versionNeeds.map(\.file) == facts.symbolTable.versionNeeds.map(\.file)
            && f.symbolTable.versionNeeds.map { $0.versions.map(\.name) }
              == facts.symbolTable.versionNeeds.map { $0.versions.map(\.name) },
          "offset \(at)")
      case .failure(let e):
        #expect(e.description.contains(".gnu.version_r"), "offset \(at): \(e)")
      }
    }
    // The file name past the string table is refused, whatever else holds.
    var named = b
    named.put(0xFFFF_FFF0, at: start + 4, width: 4)
    #expect(throws: BinaryError.self) { try ELFInspector.inspect(contents: named.bytes, path: "m.so").get() }
  }
}
