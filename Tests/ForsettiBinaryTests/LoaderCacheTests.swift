import ForsettiBinary
import ForsettiTestSupport
import Foundation
import Testing

/// `LoaderCache` read against the real thing: the system's `/etc/ld.so.cache` and caches the
/// real `ldconfig` writes in each of its formats, compared with what `ldconfig -p` prints of
/// them; and damaged bytes, which must be refused or read in part, never trap.
@Suite(.onTestThreads) struct LoaderCacheTests {
  let dir = TemporaryDirectory("ldcache")

  /// `ldconfig -p`'s description of the entries the host's loader takes (`libc6,x86-64`).
  static var hostDescription: String? {
    switch ELFMachine.host {
    case .x86_64: "libc6,x86-64"
    case .aarch64: "libc6,AArch64"
    default: nil
    }
  }

  static var hostFlags: Int32? { LoaderCache.flags(elfClass: .host, machine: .host) }

  /// What `ldconfig -p` prints of the cache at `path`, for the host's loader: each name's first
  /// plain entry (no hwcap), in the cache's order.
  static func ldconfigListing(_ cachePath: String? = nil) throws -> [(name: String, path: String)] {
    let description = try #require(hostDescription, "no ldconfig description known for this machine")
    let r = try ProcessRunner.run(
      "/sbin/ldconfig", ["-p"] + (cachePath.map { ["-C", $0] } ?? []))
    try #require(r.status == 0, "ldconfig -p failed: \(r.stderr)")
    var out: [(String, String)] = []
    var seen: Set<String> = []
    for line in r.stdout.split(separator: "\n") where line.hasPrefix("\t") {
      // "\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6"
      guard let open = line.range(of: " ("), let arrow = line.range(of: ") => ") else { continue }
      let name = String(line[line.index(after: line.startIndex)..<open.lowerBound])
      let desc = String(line[open.upperBound..<arrow.lowerBound])
      guard desc == description, seen.insert(name).inserted else { continue }
      out.append((name, String(line[arrow.upperBound...])))
    }
    return out
  }

  @Test func theSystemCacheAgreesWithLdconfig() throws {
    let cache = try #require(LoaderCache.system(), "/etc/ld.so.cache is missing or unread")
    let flags = try #require(Self.hostFlags)
    let listing = try Self.ldconfigListing()
    // libc.so.6 first, by name: the one every module needs.
    let libc = try #require(listing.first { $0.name == "libc.so.6" }, "ldconfig -p lists no libc.so.6")
    #expect(cache.path(for: "libc.so.6", flags: flags) == libc.path)
    #expect(FileManager.default.fileExists(atPath: libc.path))
    #expect(listing.count > 20, "ldconfig -p listed \(listing.count) libraries")
    for (name, path) in listing {
      #expect(cache.path(for: name, flags: flags) == path, "\(name)")
    }
    // Another class's flags find none of the host's entries under the host's paths.
    let foreign = try #require(LoaderCache.flags(elfClass: .elf32, machine: .x86))
    #expect(cache.path(for: "libc.so.6", flags: foreign) != libc.path)
  }

  /// A directory with one real library, and a configuration naming it for `ldconfig -f`.
  func libraryDirectory() throws -> (conf: String, lib: String) {
    let libs = dir.url("conf-libs")
    try FileManager.default.createDirectory(atPath: libs, withIntermediateDirectories: true)
    try CFixture.sharedObject(
      "conf-libs/libforsettiprobe.so.1", source: "int forsetti_probe(void) { return 1; }\n", in: dir,
      extraFlags: ["-Wl,-soname,libforsettiprobe.so.1"])
    let conf = try dir.write("ld.so.conf", libs + "\n")
    return (conf, libs + "/libforsettiprobe.so.1")
  }

  @Test(arguments: ["new", "old", "compat"])
  func readsWhatLdconfigWrites(_ format: String) throws {
    let (conf, lib) = try libraryDirectory()
    let file = dir.url("ld.so.cache.\(format)")
    // -X: no links made in the directories scanned; -i: no auxiliary cache written.
    let r = try ProcessRunner.run("/sbin/ldconfig", ["-X", "-i", "-c", format, "-C", file, "-f", conf])
    try #require(r.status == 0, "ldconfig -c \(format) failed: \(r.stderr)")
    let bytes = try #require(FileManager.default.contents(atPath: file).map { [UInt8]($0) })
    // Read outside #require, which would print all the bytes when it fails.
    let parsed = LoaderCache(bytes: bytes)
    let cache = try #require(parsed, "a \(format) cache written by ldconfig was refused")
    let flags = try #require(Self.hostFlags)
    #expect(cache.path(for: "libforsettiprobe.so.1", flags: flags) == lib)
    let listing = try Self.ldconfigListing(file)
    #expect(listing.contains { $0.name == "libforsettiprobe.so.1" && $0.path == lib })
    for (name, path) in listing {
      #expect(cache.path(for: name, flags: flags) == path, "\(format): \(name)")
    }
    // Every entry read is one ldconfig lists (under some description).
    let all = try ProcessRunner.run("/sbin/ldconfig", ["-p", "-C", file]).stdout
    #expect(cache.entries.count == all.split(separator: "\n").filter { $0.hasPrefix("\t") }.count)
  }

  @Test(arguments: CacheBytes.Format.allCases)
  func craftedCachesResolve(_ format: CacheBytes.Format) throws {
    let libs = [
      CacheBytes.Lib("libalpha.so.1", "/opt/a/libalpha.so.1"),
      CacheBytes.Lib("libbeta.so.2", "/opt/b/glibc-hwcaps/x86-64-v3/libbeta.so.2", hwcap: 1 << 62 | 1),
      CacheBytes.Lib("libbeta.so.2", "/opt/b/libbeta.so.2"),
      CacheBytes.Lib("libgamma.so", "/opt/g32/libgamma.so", flags: 0x0003),
      CacheBytes.Lib("libgamma.so", "/opt/g/libgamma.so"),
      CacheBytes.Lib("libonlyhw.so", "/opt/h/glibc-hwcaps/x86-64-v2/libonlyhw.so", hwcap: 1 << 62 | 2),
    ]
    let parsed = LoaderCache(bytes: CacheBytes.make(format, libs))
    let cache = try #require(parsed)
    #expect(cache.entries.count == libs.count)
    let x64: Int32 = 0x0303
    #expect(cache.path(for: "libalpha.so.1", flags: x64) == "/opt/a/libalpha.so.1")
    #expect(cache.path(for: "libgamma.so", flags: x64) == "/opt/g/libgamma.so")
    #expect(cache.path(for: "libgamma.so", flags: 0x0003) == "/opt/g32/libgamma.so")
    #expect(cache.path(for: "libabsent.so", flags: x64) == nil)
    if format == .old {
      // The old format has no hwcap field: entries are taken in order.
      #expect(cache.path(for: "libbeta.so.2", flags: x64) == "/opt/b/glibc-hwcaps/x86-64-v3/libbeta.so.2")
    } else {
      #expect(cache.path(for: "libbeta.so.2", flags: x64) == "/opt/b/libbeta.so.2")
      #expect(cache.path(for: "libonlyhw.so", flags: x64) == "/opt/h/glibc-hwcaps/x86-64-v2/libonlyhw.so")
    }
  }

  @Test func aCompatCacheIsReadFromItsNewTableElseItsOld() throws {
    let x64: Int32 = 0x0303
    let bytes = CacheBytes.compat(
      old: [CacheBytes.Lib("libdelta.so", "/old/libdelta.so")],
      new: [CacheBytes.Lib("libdelta.so", "/new/libdelta.so")])
    #expect(LoaderCache(bytes: bytes)?.path(for: "libdelta.so", flags: x64) == "/new/libdelta.so")
    // The new table damaged (its magic): the loader reads the old one, and so does this.
    let newAt = (16 + 12 + 7) & ~7
    var damaged = bytes
    damaged[newAt] ^= 0xFF
    #expect(LoaderCache(bytes: damaged)?.path(for: "libdelta.so", flags: x64) == "/old/libdelta.so")
    // The old table claiming more entries than the file holds: no cache at all.
    var overlong = bytes
    overlong.replaceSubrange(12..<16, with: [0xFF, 0xFF, 0xFF, 0x0F])
    #expect(LoaderCache(bytes: overlong) == nil)
  }

  @Test func aNewCacheOfTheOtherByteOrderIsIgnored() throws {
    var bytes = CacheBytes.make(.new, [CacheBytes.Lib("libalpha.so.1", "/opt/a/libalpha.so.1")])
    #expect(LoaderCache(bytes: bytes) != nil)
    bytes[28] = 3  // cache_file_new_flags_endian_big
    #expect(LoaderCache(bytes: bytes) == nil)
  }

  /// Every prefix of a small valid cache: refused, or read in part (entries whose strings
  /// were cut off are left out); never a trap, never an entry the whole file lacks.
  @Test(arguments: CacheBytes.Format.allCases)
  func everyPrefixIsRefusedOrReadInPart(_ format: CacheBytes.Format) throws {
    let libs = (0..<5).map { CacheBytes.Lib("libn\($0).so", "/opt/n\($0)/libn\($0).so") }
    let bytes = CacheBytes.make(format, libs)
    let parsed = LoaderCache(bytes: bytes)
    let whole = try #require(parsed)
    #expect(whole.entries.count == libs.count)
    let tableEnd = CacheBytes.tableEnd(format, count: libs.count)
    // From where every entry can be read: the whole file, but for compat, whose new table's
    // strings come before the old table's.
    let complete = format == .compat ? bytes.count - CacheBytes.strings(libs).bytes.count : bytes.count
    for n in 0..<bytes.count {
      let part = LoaderCache(bytes: Array(bytes[..<n]))
      if n < tableEnd {
        #expect(
          part == nil, "a \(format) cache cut to \(n) of \(bytes.count) bytes, inside its table, was read")
      } else {
        let entries = try #require(part, "\(format) cut to \(n) bytes, after its table, was refused").entries
        #expect(entries.allSatisfy(whole.entries.contains), "\(format) cut to \(n) bytes")
        #expect((entries.count == libs.count) == (n >= complete), "\(format) cut to \(n) bytes")
      }
    }
  }

  @Test func entriesPointingOutsideTheFileAreLeftOut() throws {
    let good = CacheBytes.Lib("libgood.so", "/opt/libgood.so")
    var bytes = CacheBytes.make(.new, [good, CacheBytes.Lib("libbad.so", "/opt/libbad.so")])
    // Entry 1's path offset past the end; then its name offset at the last byte, with no NUL.
    let entry1 = 48 + 24
    bytes.replaceSubrange(entry1 + 8..<entry1 + 12, with: [0xF0, 0xFF, 0xFF, 0xFF])
    #expect(LoaderCache(bytes: bytes)?.entries.map(\.name) == ["libgood.so"])
    bytes.replaceSubrange(entry1 + 8..<entry1 + 12, with: CacheBytes.le32(UInt32(bytes.count - 1)))
    bytes[bytes.count - 1] = UInt8(ascii: "x")
    #expect(LoaderCache(bytes: bytes)?.entries.map(\.name) == ["libgood.so"])
    // A name that is no UTF-8.
    var invalid = CacheBytes.make(.new, [good, CacheBytes.Lib("lib\u{E9}.so", "/opt/x.so")])
    let at = try #require(invalid.firstIndex(of: 0xC3))
    invalid[at] = 0xFF
    #expect(LoaderCache(bytes: invalid)?.entries.map(\.name) == ["libgood.so"])
  }

  @Test func countsBeyondTheFileAreRefused() throws {
    var bytes = CacheBytes.make(.new, [CacheBytes.Lib("liba.so", "/a/liba.so")])
    for count: UInt32 in [2, 1 << 20, 1 << 20 + 1, UInt32.max] {
      bytes.replaceSubrange(20..<24, with: CacheBytes.le32(count))
      #expect(LoaderCache(bytes: bytes) == nil, "count \(count)")
    }
  }

  /// Seeded noise, alone and behind each format's magic, and every byte of a valid cache
  /// flipped: read or refused, and whatever is read is consistent with itself.
  @Test func garbageIsReadOrRefusedWithoutATrap() throws {
    var rng = SeededBytes(seed: 0x5EED)
    var inputs: [[UInt8]] = []
    for length in [0, 1, 11, 16, 47, 48, 49, 100, 1000] {
      let noise = rng.bytes(length)
      inputs += [noise, Array("glibc-ld.so.cache1.1".utf8) + noise, Array("ld.so-1.7.0".utf8) + [0] + noise]
    }
    for format in CacheBytes.Format.allCases {
      let valid = CacheBytes.make(
        format, [CacheBytes.Lib("liba.so", "/a/liba.so"), CacheBytes.Lib("libb.so", "/b")])
      for i in valid.indices {
        for flip: UInt8 in [0x01, 0x80, 0xFF] {
          var m = valid
          m[i] ^= flip
          inputs.append(m)
        }
      }
    }
    var read = 0
    for input in inputs {
      guard let cache = LoaderCache(bytes: input) else { continue }
      read += 1
      for e in cache.entries { #expect(cache.path(for: e.name, flags: e.flags) != nil) }
    }
    // The flips outside the magic and counts leave a cache: the loop above had work.
    #expect(read > inputs.count / 2, "only \(read) of \(inputs.count) inputs were read")
    #expect(LoaderCache(bytes: rng.bytes(4096)) == nil)
  }

  @Test func aMissingOrUnreadableFileIsNoCache() throws {
    #expect(LoaderCache.system(path: dir.url("absent")) == nil)
    #expect(LoaderCache.system(path: dir.path) == nil)
    let empty = try dir.write("empty", "")
    #expect(LoaderCache.system(path: empty) == nil)
    let file = try dir.write("cache", bytes: CacheBytes.make(.new, [CacheBytes.Lib("liba.so", "/a/liba.so")]))
    #expect(LoaderCache.system(path: file)?.entries.count == 1)
  }
}

/// Small deterministic noise: the same bytes on every run.
struct SeededBytes {
  var state: UInt64
  init(seed: UInt64) { state = seed }
  mutating func next() -> UInt8 {
    state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
    return UInt8(truncatingIfNeeded: state >> 33)
  }
  mutating func bytes(_ n: Int) -> [UInt8] { (0..<n).map { _ in next() } }
}

/// `ld.so.cache` files built byte by byte as glibc's `ldconfig` lays them out
/// (`sysdeps/generic/dl-cache.h`), for tests that need what ldconfig will not write.
enum CacheBytes {
  enum Format: String, CaseIterable, Sendable { case new, old, compat }

  struct Lib {
    var name: String
    var path: String
    var flags: Int32
    var hwcap: UInt64
    init(_ name: String, _ path: String, flags: Int32 = 0x0303, hwcap: UInt64 = 0) {
      self.name = name
      self.path = path
      self.flags = flags
      self.hwcap = hwcap
    }
  }

  static func le32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
  static func le64(_ v: UInt64) -> [UInt8] { le32(UInt32(truncatingIfNeeded: v)) + le32(UInt32(v >> 32)) }

  static func make(_ format: Format, _ libs: [Lib]) -> [UInt8] {
    switch format {
    case .new:
      let (table, strings) = newTable(libs, stringsAfter: 0)
      return table + strings
    case .old: return old(libs)
    case .compat: return compat(old: libs, new: libs)
    }
  }

  /// Where the entry table ends: a prefix shorter than this holds no whole table.
  static func tableEnd(_ format: Format, count: Int) -> Int {
    switch format {
    case .new: 48 + 24 * count
    case .old: 16 + 12 * count
    // The new table is taken when whole; cut, the old one is (its strings lie at the end).
    case .compat: 16 + 12 * count
    }
  }

  /// One NUL-terminated string per name and path, and their offsets in that table.
  static func strings(_ libs: [Lib]) -> (bytes: [UInt8], offsets: [(name: Int, path: Int)]) {
    var bytes: [UInt8] = []
    var offsets: [(Int, Int)] = []
    for l in libs {
      let n = bytes.count
      bytes += Array(l.name.utf8) + [0]
      let p = bytes.count
      bytes += Array(l.path.utf8) + [0]
      offsets.append((n, p))
    }
    return (bytes, offsets)
  }

  /// The new header and entries; string offsets count from the header, the strings following
  /// `stringsAfter` bytes of anything else after the entries.
  static func newTable(_ libs: [Lib], stringsAfter gap: Int) -> (table: [UInt8], strings: [UInt8]) {
    let (strings, offsets) = strings(libs)
    let first = 48 + 24 * libs.count + gap
    var out = Array("glibc-ld.so.cache1.1".utf8)
    out += le32(UInt32(libs.count)) + le32(UInt32(strings.count))
    out += [2, 0, 0, 0]  // little-endian; padding
    out += le32(0) + le32(0) + le32(0) + le32(0)  // extension_offset, unused[3]
    for (l, o) in zip(libs, offsets) {
      out += le32(UInt32(bitPattern: l.flags)) + le32(UInt32(first + o.name)) + le32(UInt32(first + o.path))
      out += le32(0) + le64(l.hwcap)
    }
    return (out, strings)
  }

  static func oldHeader(_ count: Int) -> [UInt8] { Array("ld.so-1.7.0".utf8) + [0] + le32(UInt32(count)) }

  static func old(_ libs: [Lib]) -> [UInt8] {
    let (strings, offsets) = strings(libs)
    var out = oldHeader(libs.count)
    for (l, o) in zip(libs, offsets) {
      out += le32(UInt32(bitPattern: l.flags)) + le32(UInt32(o.name)) + le32(UInt32(o.path))
    }
    return out + strings
  }

  /// An old table, padding to 8, and a new table; one string area at the end that both
  /// point into, as ldconfig -c compat writes it.
  static func compat(old: [Lib], new: [Lib]) -> [UInt8] {
    let oldEnd = 16 + 12 * old.count
    let base = (oldEnd + 7) & ~7
    let (newPart, newStrings) = newTable(new, stringsAfter: 0)
    let (oldStrings, oldOffsets) = strings(old)
    // The new table's strings first, then the old table's.
    let oldStringsAt = base + newPart.count + newStrings.count
    var out = oldHeader(old.count)
    for (l, o) in zip(old, oldOffsets) {
      out += le32(UInt32(bitPattern: l.flags)) + le32(UInt32(oldStringsAt - oldEnd + o.name))
      out += le32(UInt32(oldStringsAt - oldEnd + o.path))
    }
    out += [UInt8](repeating: 0, count: base - oldEnd)
    return out + newPart + newStrings + oldStrings
  }
}
