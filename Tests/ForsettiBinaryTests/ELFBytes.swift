/// A 64-bit little-endian ELF file as bytes, with the header fields a crafted file lies with
/// addressed by name, so each test says which number it breaks.
struct ELFBytes {
  var bytes: [UInt8]

  static let dynsym: UInt32 = 11
  static let dynamic: UInt32 = 6
  static let strtab: UInt32 = 3
  static let versym: UInt32 = 0x6fff_ffff
  static let verdef: UInt32 = 0x6fff_fffd
  static let verneed: UInt32 = 0x6fff_fffe

  /// Byte offsets of the fields inside one Elf64_Shdr.
  enum Field: Int {
    case name = 0x00, type = 0x04, offset = 0x18, size = 0x20, link = 0x28, info = 0x2C, entsize = 0x38

    var width: Int { self == .name || self == .type || self == .link || self == .info ? 4 : 8 }
  }

  func read(_ offset: Int, width: Int) -> UInt64 {
    (0..<width).reduce(UInt64(0)) { $0 | UInt64(bytes[offset + $1]) << (8 * UInt64($1)) }
  }

  mutating func put(_ value: UInt64, at offset: Int, width: Int) {
    for i in 0..<width { bytes[offset + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(i))) }
  }

  var sectionTable: Int { Int(read(0x28, width: 8)) }
  var sectionCount: Int { Int(read(0x3C, width: 2)) }

  /// Offset of section `i`'s header.
  func header(_ i: Int) -> Int { sectionTable + 64 * i }

  /// Index of the first section of `type`.
  func section(ofType type: UInt32) -> Int? {
    (0..<sectionCount).first { read(header($0) + Field.type.rawValue, width: 4) == UInt64(type) }
  }

  func field(_ f: Field, of section: Int) -> UInt64 { read(header(section) + f.rawValue, width: f.width) }

  mutating func set(_ f: Field, of section: Int, to value: UInt64) {
    put(value, at: header(section) + f.rawValue, width: f.width)
  }

  /// The file offset and size of a section's contents.
  func contents(of section: Int) -> Range<Int> {
    let start = Int(field(.offset, of: section))
    return start..<start + Int(field(.size, of: section))
  }
}
