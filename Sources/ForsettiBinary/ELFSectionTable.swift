import CLibElf
import Glibc

/// One section header whose numbers have been checked against the file: its contents lie
/// inside the file, so nothing read through it can run past the end.
struct ELFSection {
  let index: Int
  let handle: OpaquePointer
  let type: UInt32
  /// Where the contents start in the file; meaningless for `SHT_NOBITS`.
  let offset: Int
  /// How many bytes of the file the contents take (0 for `SHT_NOBITS`, which has none).
  let size: Int
  let link: UInt32
  let info: UInt32
  let entrySize: UInt64
  let nameOffset: UInt32

  var hasContents: Bool { type != UInt32(SHT_NOBITS) }
}

/// Every section header of a file, checked before any section is read: a table read through a
/// later section (a string table, a version table) is known to be inside the file by then.
struct ELFSectionTable {
  let elf: OpaquePointer
  let path: String
  let sections: [ELFSection]

  /// Reads and checks every header; `fileSize` is the length every offset is held to.
  static func read(_ elf: OpaquePointer, path: String, fileSize: Int) -> Result<ELFSectionTable, BinaryError>
  {
    var count = 0
    guard elf_getshdrnum(elf, &count) == 0 else {
      return .failure(.malformed(path: path, detail: "unreadable section count: \(ELFInspector.lastError())"))
    }
    var ehdr = GElf_Ehdr()
    guard gelf_getehdr(elf, &ehdr) != nil else {
      return .failure(.truncated(path: path, detail: "the ELF header is incomplete (\(fileSize) bytes)"))
    }
    // A header size other than the class's own would let a huge count pass the check below
    // (0 × anything fits in any file).
    let headerSize = gelf_fsize(elf, ELF_T_SHDR, 1, UInt32(EV_CURRENT))
    if count > 0 || ehdr.e_shnum > 0, Int(ehdr.e_shentsize) != headerSize {
      return .failure(
        .malformed(
          path: path,
          detail: "e_shentsize says section headers are \(ehdr.e_shentsize) bytes; they are \(headerSize)"))
    }
    // The header's count is held to the file even when libelf, finding the table cut off,
    // reports fewer; with extended numbering (e_shnum 0) the count is section 0's.
    let declared = max(UInt64(ehdr.e_shnum), UInt64(count))
    let (table, o1) = declared.multipliedReportingOverflow(by: UInt64(ehdr.e_shentsize))
    let (end, o2) = UInt64(ehdr.e_shoff).addingReportingOverflow(table)
    if o1 || o2 || end > UInt64(fileSize) {
      return .failure(
        .truncated(
          path: path,
          detail:
            "the section table (\(declared) headers at byte \(ehdr.e_shoff)) ends at byte \(o1 || o2 ? "past 2^64" : String(end)) but the file has \(fileSize) bytes"
        ))
    }
    // e_shnum 0 with a table present means "the count is section 0's sh_size"; libelf
    // answers 0 when that count cannot be right, which must not pass for "no sections".
    if count == 0 && ehdr.e_shoff != 0 {
      return .failure(
        .malformed(
          path: path,
          detail:
            "the section table at byte \(ehdr.e_shoff) has no readable headers (e_shnum \(ehdr.e_shnum))"))
    }
    var sections: [ELFSection] = []
    sections.reserveCapacity(count)
    for i in 0..<count {
      guard let scn = elf_getscn(elf, i) else {
        return .failure(
          .malformed(path: path, detail: "section \(i) is unreadable: \(ELFInspector.lastError())"))
      }
      var shdr = GElf_Shdr()
      guard gelf_getshdr(scn, &shdr) != nil else {
        return .failure(
          .malformed(path: path, detail: "section \(i)'s header is unreadable: \(ELFInspector.lastError())"))
      }
      let noBits = shdr.sh_type == UInt32(SHT_NOBITS)
      let (end, overflow) = shdr.sh_offset.addingReportingOverflow(shdr.sh_size)
      if !noBits && (overflow || end > UInt64(fileSize)) {
        return .failure(
          .truncated(
            path: path,
            detail:
              "section \(i) (\(shdr.sh_size) bytes at byte \(shdr.sh_offset)) ends at byte \(overflow ? "past 2^64" : String(end)) but the file has \(fileSize) bytes"
          ))
      }
      // Both fit in Int once they are inside the file.
      let offset = noBits ? 0 : Int(exactly: shdr.sh_offset) ?? 0
      let size = noBits ? 0 : Int(exactly: shdr.sh_size) ?? 0
      sections.append(
        ELFSection(
          index: i, handle: scn, type: shdr.sh_type, offset: offset, size: size, link: shdr.sh_link,
          info: shdr.sh_info, entrySize: shdr.sh_entsize, nameOffset: shdr.sh_name))
    }
    return .success(ELFSectionTable(elf: elf, path: path, sections: sections))
  }

  /// The sections of `type`, in table order.
  func all(ofType type: UInt32) -> [ELFSection] { sections.filter { $0.type == type } }

  /// The one section of `type`, nil when there is none; two are a malformed file, since the
  /// dynamic loader and this inspector could then read different ones.
  func unique(_ type: UInt32, _ what: String) -> Result<ELFSection?, BinaryError> {
    // One pass without an array: every file is asked this several times, and a second section
    // of a type (the only case that needs the list) is rare.
    guard let first = sections.firstIndex(where: { $0.type == type }) else { return .success(nil) }
    guard sections[(first + 1)...].contains(where: { $0.type == type }) else {
      return .success(sections[first])
    }
    let found = all(ofType: type)
    if found.count > 1 {
      return .failure(
        .malformed(
          path: path,
          detail:
            "\(found.count) \(what) sections (\(found.map { String($0.index) }.joined(separator: ", ")))"))
    }
    return .success(found.first)
  }

  /// The section `owner` links to through `sh_link`.
  func linked(from owner: ELFSection, _ what: String) -> Result<ELFSection, BinaryError> {
    guard let i = Int(exactly: owner.link), i > 0, i < sections.count else {
      return .failure(
        .malformed(
          path: path,
          detail: "\(what) (section \(owner.index)) links to section \(owner.link), which does not exist"))
    }
    return .success(sections[i])
  }

  /// The section's entry size must be what this file's class says a `type` entry takes.
  func requireEntrySize(_ s: ELFSection, of type: Elf_Type, _ what: String) -> Result<Int, BinaryError> {
    let expected = gelf_fsize(elf, type, 1, UInt32(EV_CURRENT))
    guard expected > 0, s.entrySize == UInt64(expected) else {
      return .failure(
        .malformed(
          path: path,
          detail:
            "\(what) (section \(s.index)) says its entries are \(s.entrySize) bytes; they are \(expected)"))
    }
    return .success(expected)
  }

  /// The section's contents as libelf converted them, refused when libelf claims more bytes
  /// than the checked header holds.
  func data(_ s: ELFSection, _ what: String) -> Result<UnsafeMutablePointer<Elf_Data>, BinaryError> {
    guard s.hasContents else {
      return .failure(
        .malformed(path: path, detail: "\(what) (section \(s.index)) has no contents (SHT_NOBITS)"))
    }
    guard let data = elf_getdata(s.handle, nil) else {
      return .failure(
        .malformed(
          path: path, detail: "\(what) (section \(s.index)) is unreadable: \(ELFInspector.lastError())"))
    }
    let size = data.pointee.d_size
    guard size <= s.size, size == 0 || data.pointee.d_buf != nil else {
      return .failure(
        .malformed(
          path: path, detail: "\(what) (section \(s.index)) reads as \(size) bytes but holds \(s.size)"))
    }
    return .success(data)
  }

  /// A table of fixed-size `type` entries: its checked entry size, then its contents.
  func entries(_ s: ELFSection, of type: Elf_Type, _ what: String) -> Result<
    (size: Int, data: UnsafeMutablePointer<Elf_Data>), BinaryError
  > {
    requireEntrySize(s, of: type, what).flatMap { n in data(s, what).map { (n, $0) } }
  }

  /// A string table's bytes in place, checked as `strings` checks them, valid while `elf` is.
  func rawStrings(_ s: ELFSection, _ what: String) -> Result<RawStringTable, BinaryError> {
    data(s, what).map { d in
      RawStringTable(bytes: UnsafeRawBufferPointer(start: d.pointee.d_buf, count: d.pointee.d_size))
    }
  }

  /// A string table's bytes, always ending in NUL: a last name running off the end is cut
  /// there, as `elf_strptr` would refuse it.
  func strings(_ s: ELFSection, _ what: String) -> Result<StringTable, BinaryError> {
    switch data(s, what) {
    case .failure(let e): return .failure(e)
    case .success(let d):
      var bytes: [UInt8] = []
      if let buf = d.pointee.d_buf {
        bytes = Array(UnsafeRawBufferPointer(start: buf, count: d.pointee.d_size))
      }
      if bytes.last != 0 { bytes.append(0) }
      return .success(StringTable(bytes: bytes))
    }
  }
}

/// A string table's bytes as libelf holds them, read in place while its `Elf` lives: finding
/// one section name needs no copy of the table.
struct RawStringTable {
  let bytes: UnsafeRawBufferPointer

  /// Whether the string at `offset` is exactly `name`, as `StringTable.equals` answers on a
  /// copy of these bytes: a name running to the table's end ends there, as the copy's added
  /// NUL would end it.
  func equals(_ offset: UInt64, _ name: [UInt8]) -> Bool {
    guard !name.isEmpty, offset < UInt64(bytes.count), let start = Int(exactly: offset),
      let base = bytes.baseAddress
    else { return false }
    let (end, overflow) = start.addingReportingOverflow(name.count)
    guard !overflow, end <= bytes.count, end == bytes.count || bytes[end] == 0 else { return false }
    return name.withUnsafeBytes { n in n.baseAddress.map { memcmp(base + start, $0, n.count) == 0 } ?? false }
  }
}

/// A NUL-terminated string table; every lookup is bounded by its length.
struct StringTable {
  /// Ends in NUL.
  let bytes: [UInt8]

  /// Whether `offset` names a string inside the table (the final NUL is the empty string).
  func contains(_ offset: UInt64) -> Bool { offset < UInt64(bytes.count) }

  /// The string at `offset`, or nil when the offset lies outside the table.
  func string(at offset: UInt64) -> String? {
    guard contains(offset), let start = Int(exactly: offset) else { return nil }
    let end = bytes[start...].firstIndex(of: 0) ?? bytes.count
    return String(decoding: bytes[start..<end], as: UTF8.self)
  }

  /// Whether the string at `offset` is exactly `name`.
  func equals(_ offset: UInt64, _ name: [UInt8]) -> Bool {
    guard contains(offset), let start = Int(exactly: offset) else { return false }
    let (end, overflow) = start.addingReportingOverflow(name.count)
    guard !overflow, end < bytes.count else { return false }
    return bytes[end] == 0 && bytes[start..<end].elementsEqual(name)
  }
}
