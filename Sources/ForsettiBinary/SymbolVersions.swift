import CLibElf

/// GNU symbol versioning (`.gnu.version`, `.gnu.version_d`): which version of a name each
/// `.dynsym` entry is, and whether plain `dlsym` can find it.
enum SymbolVersions {
  /// `.gnu.version`'s bit for a non-default version (`name@V`, not `name@@V`).
  static let hiddenBit: UInt16 = 0x8000
  /// Indexes below this are not versions: 0 is local, 1 the unversioned global.
  static let firstDefinedIndex: UInt16 = 2

  /// Whether `dlsym` (glibc's newest-version lookup) can return a definition with this
  /// `.gnu.version` value: unversioned, or a default version. A non-default version is only
  /// reachable through `dlvsym`.
  static func isFoundByDlsym(_ versym: UInt16) -> Bool {
    versym & ~hiddenBit < firstDefinedIndex || versym & hiddenBit == 0
  }

  /// One `.gnu.version` value per `.dynsym` entry; nil when the file has no version table.
  static func indexes(
    _ table: ELFSectionTable, symbols: ELFSection, count: Int
  ) -> Result<[UInt16]?, BinaryError> {
    let path = table.path
    guard
      let section = table.sections.first(where: {
        $0.type == UInt32(SHT_GNU_versym) && Int(exactly: $0.link) == symbols.index
      })
    else { return .success(nil) }
    let what = ".gnu.version"
    let entry: Int
    let data: UnsafeMutablePointer<Elf_Data>
    switch table.entries(section, of: ELF_T_HALF, what) {
    case .failure(let e): return .failure(e)
    case .success(let t): (entry, data) = (t.size, t.data)
    }
    // One value per symbol: the dynamic loader indexes this table by symbol number unchecked,
    // so a shorter table is a file no one can read consistently.
    let available = data.pointee.d_size / entry
    guard available == count else {
      return .failure(
        .malformed(
          path: path,
          detail: "\(what) (section \(section.index)) has \(available) entries for \(count) symbols"))
    }
    var out: [UInt16] = []
    out.reserveCapacity(count)
    var v = GElf_Versym()
    for i in 0..<count {
      // count fits in Int32: the caller caps the symbol count there.
      guard let ndx = Int32(exactly: i), gelf_getversym(data, ndx, &v) != nil else {
        return .failure(
          .malformed(path: path, detail: "\(what) entry \(i) is unreadable: \(ELFInspector.lastError())"))
      }
      out.append(v)
    }
    return .success(out)
  }

  /// The one section of `type` with its linked string table and its data; nil when the file
  /// has none. The preamble `.gnu.version_d` and `.gnu.version_r` share.
  private static func versionSection(_ table: ELFSectionTable, _ type: UInt32, _ what: String) -> Result<
    (ELFSection, StringTable, UnsafeMutablePointer<Elf_Data>)?, BinaryError
  > {
    switch table.unique(type, what) {
    case .failure(let e): return .failure(e)
    case .success(nil): return .success(nil)
    case .success(let section?):
      return table.linked(from: section, what)
        .flatMap { table.strings($0, "\(what)'s string table") }
        .flatMap { strings in table.data(section, what).map { (section, strings, $0) } }
    }
  }

  /// Version index → name, from `.gnu.version_d`; empty when the file defines no versions.
  static func names(_ table: ELFSectionTable) -> Result<[UInt16: String], BinaryError> {
    let path = table.path
    let what = ".gnu.version_d"
    let section: ELFSection
    let strings: StringTable
    let data: UnsafeMutablePointer<Elf_Data>
    switch versionSection(table, UInt32(SHT_GNU_verdef), what) {
    case .failure(let e): return .failure(e)
    case .success(nil): return .success([:])
    case .success(let found?): (section, strings, data) = found
    }
    func broken(_ why: String) -> Result<[UInt16: String], BinaryError> {
      .failure(.malformed(path: path, detail: "\(what) (section \(section.index)): \(why)"))
    }
    let size = data.pointee.d_size
    let defSize = MemoryLayout<GElf_Verdef>.size
    var names: [UInt16: String] = [:]
    var offset = 0
    // vd_next only moves forward, so the walk ends within size / defSize steps whatever
    // sh_info claims.
    for n in 0..<(size / max(defSize, 1)) {
      var def = GElf_Verdef()
      guard let at = Int32(exactly: offset), gelf_getverdef(data, at, &def) != nil else {
        return broken("definition \(n) at byte \(offset) lies outside its \(size) bytes")
      }
      if def.vd_cnt > 0 {
        var aux = GElf_Verdaux()
        let (auxOffset, overflow) = offset.addingReportingOverflow(Int(def.vd_aux))
        guard !overflow, let auxAt = Int32(exactly: auxOffset), auxOffset < size,
          gelf_getverdaux(data, auxAt, &aux) != nil
        else {
          return broken(
            "definition \(n)'s name record at byte \(offset) + \(def.vd_aux) lies outside its \(size) bytes")
        }
        guard let name = strings.string(at: UInt64(aux.vda_name)) else {
          return broken(
            "definition \(n)'s name is at byte \(aux.vda_name) of a \(strings.bytes.count)-byte string table")
        }
        names[def.vd_ndx & ~hiddenBit] = name
      }
      if def.vd_next == 0 { break }
      let (next, overflow) = offset.addingReportingOverflow(Int(def.vd_next))
      guard !overflow, next < size else {
        return broken(
          "definition \(n) says the next is at byte \(offset) + \(def.vd_next), past its \(size) bytes")
      }
      offset = next
    }
    return .success(names)
  }

  /// `.gnu.version_r`: per library, the versions of it this file needs; empty when it needs
  /// none. Walked as the definitions are: every step forward, within the section's bytes.
  static func needs(_ table: ELFSectionTable) -> Result<[VersionNeed], BinaryError> {
    let path = table.path
    let what = ".gnu.version_r"
    let section: ELFSection
    let strings: StringTable
    let data: UnsafeMutablePointer<Elf_Data>
    switch versionSection(table, UInt32(SHT_GNU_verneed), what) {
    case .failure(let e): return .failure(e)
    case .success(nil): return .success([])
    case .success(let found?): (section, strings, data) = found
    }
    func broken(_ why: String) -> Result<[VersionNeed], BinaryError> {
      .failure(.malformed(path: path, detail: "\(what) (section \(section.index)): \(why)"))
    }
    let size = data.pointee.d_size
    let needSize = max(MemoryLayout<GElf_Verneed>.size, 1)
    let auxSize = max(MemoryLayout<GElf_Vernaux>.size, 1)
    var out: [VersionNeed] = []
    var offset = 0
    for n in 0..<(size / needSize) {
      var need = GElf_Verneed()
      guard let at = Int32(exactly: offset), gelf_getverneed(data, at, &need) != nil else {
        return broken("entry \(n) at byte \(offset) lies outside its \(size) bytes")
      }
      guard let file = strings.string(at: UInt64(need.vn_file)) else {
        return broken(
          "entry \(n)'s file name is at byte \(need.vn_file) of a \(strings.bytes.count)-byte string table")
      }
      var versions: [VersionNeed.Version] = []
      var auxOffset = offset
      var step = UInt64(need.vn_aux)
      // At most as many records as fit in the section, whatever vn_cnt claims.
      for k in 0..<min(Int(need.vn_cnt), size / auxSize) {
        let (next, overflow) = auxOffset.addingReportingOverflow(Int(step))
        var aux = GElf_Vernaux()
        guard !overflow, next < size, let auxAt = Int32(exactly: next),
          gelf_getvernaux(data, auxAt, &aux) != nil
        else {
          return broken(
            "entry \(n)'s version record \(k) at byte \(auxOffset) + \(step) lies outside its \(size) bytes")
        }
        guard let name = strings.string(at: UInt64(aux.vna_name)) else {
          return broken(
            "entry \(n)'s version \(k) name is at byte \(aux.vna_name) of a \(strings.bytes.count)-byte string table"
          )
        }
        versions.append(
          VersionNeed.Version(name: name, index: aux.vna_other & ~hiddenBit, weak: aux.vna_flags & 0x2 != 0))
        if aux.vna_next == 0 { break }
        auxOffset = next
        step = UInt64(aux.vna_next)
      }
      out.append(VersionNeed(file: file, versions: versions))
      if need.vn_next == 0 { break }
      let (next, overflow) = offset.addingReportingOverflow(Int(need.vn_next))
      guard !overflow, next < size else {
        return broken(
          "entry \(n) says the next is at byte \(offset) + \(need.vn_next), past its \(size) bytes")
      }
      offset = next
    }
    return .success(out)
  }
}

/// What a file needs of one library's versions (`.gnu.version_r`): the loader refuses to load
/// it when the library it maps by that name defines versions and not one of these (unless the
/// need is weak).
public struct VersionNeed: Sendable, Hashable {
  /// The library, as `DT_NEEDED` names it (`libc.so.6`).
  public var file: String
  public var versions: [Version]

  public struct Version: Sendable, Hashable {
    /// `GLIBC_2.34`.
    public var name: String
    /// The `.gnu.version` index the file's undefined symbols of this version carry.
    public var index: UInt16
    /// `VER_FLG_WEAK`: only a warning when missing.
    public var weak: Bool
  }
}
