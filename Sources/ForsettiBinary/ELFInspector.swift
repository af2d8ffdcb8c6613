import CLibElf
import Glibc

/// Reads ELF facts with libelf. No code of the file runs: it is read, never mapped executable.
public enum ELFInspector {
  /// The `.forsetti.manifest` section name modules may use to embed their manifest.
  public static let manifestSection = ".forsetti.manifest"
  /// The name as bytes, made once: converting per section showed in profiles.
  private static let manifestSectionBytes = Array(manifestSection.utf8)
  /// Embedded manifests larger than this are ignored as implausible.
  static let maxEmbeddedManifest = 1 << 20

  private static let libelfReady: Bool = elf_version(UInt32(EV_CURRENT)) != UInt32(EV_NONE)

  /// Inspects the file at `path`.
  public static func inspect(_ path: String) -> Result<ELFFacts, BinaryError> {
    inspect(path, name: path, relativeTo: AT_FDCWD)
  }

  /// Inspects the file `name` in the open `directory`, as `path` names it: indexing a directory
  /// opens each file relative to it, so the kernel does not walk the directory's path again.
  static func inspect(_ path: String, name: String, relativeTo directory: Int32) -> Result<
    ELFFacts, BinaryError
  > {
    guard libelfReady else {
      return .failure(.malformed(path: path, detail: "libelf could not be initialised"))
    }
    let image: FileImage
    switch FileImage.open(path, name: name, relativeTo: directory) {
    case .success(let i): image = i
    case .failure(let e): return .failure(e)
    }
    defer { image.release() }
    switch image.storage {
    case .memory(let base, let count):
      let start = UnsafeRawPointer(base)?.assumingMemoryBound(to: UInt8.self)
      return inspect(UnsafeBufferPointer(start: start, count: count), base: base, path: path)
    case .descriptor(let fd, let size):
      var head: [UInt8] = [0, 0, 0, 0]
      let n = head.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 4, 0) }
      guard n == 4, head == [0x7F, 0x45, 0x4C, 0x46] else {
        return .failure(.notELF(path: path, leadingBytes: hex(head.prefix(max(n, 0)))))
      }
      // Read on demand with pread: a file cut short meanwhile gives short reads and an
      // error, where a mapping would give SIGBUS.
      guard let elf = elf_begin(fd, ELF_C_READ, nil) else {
        return .failure(.malformed(path: path, detail: lastError()))
      }
      defer { elf_end(elf) }
      return facts(elf, path: path, size: size)
    }
  }

  private static func hex<C: Collection<UInt8>>(_ bytes: C) -> String {
    bytes.isEmpty
      ? "nothing: the file is empty"
      : bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined(separator: " ")
  }

  /// Inspects `contents` as the file `path` would be: no file is read (fuzzing, tests).
  public static func inspect(contents: [UInt8], path: String) -> Result<ELFFacts, BinaryError> {
    guard libelfReady else {
      return .failure(.malformed(path: path, detail: "libelf could not be initialised"))
    }
    // libelf takes a mutable image; it gets a copy of its own.
    var copy = contents
    return copy.withUnsafeMutableBufferPointer { buffer in
      let base = UnsafeMutableRawPointer(buffer.baseAddress)?.assumingMemoryBound(to: CChar.self)
      return inspect(UnsafeBufferPointer(buffer), base: buffer.isEmpty ? nil : base, path: path)
    }
  }

  private static func inspect(
    _ bytes: UnsafeBufferPointer<UInt8>, base: UnsafeMutablePointer<CChar>?, path: String
  )
    -> Result<ELFFacts, BinaryError>
  {
    guard bytes.count >= 4, bytes[0] == 0x7F, bytes[1] == 0x45, bytes[2] == 0x4C, bytes[3] == 0x46 else {
      return .failure(.notELF(path: path, leadingBytes: hex(bytes.prefix(4))))
    }
    // libelf parses the image in memory: one read of the file instead of a pread per header,
    // section and string table.
    guard let base, let elf = elf_memory(base, bytes.count) else {
      return .failure(.malformed(path: path, detail: lastError()))
    }
    defer { elf_end(elf) }
    return facts(elf, path: path, size: bytes.count)
  }

  static func lastError() -> String {
    guard let msg = elf_errmsg(-1) else { return "unknown libelf error" }
    return String(cString: msg)
  }

  private static func facts(_ elf: OpaquePointer, path: String, size: Int) -> Result<ELFFacts, BinaryError> {
    guard elf_kind(elf) == ELF_K_ELF else {
      return .failure(.malformed(path: path, detail: "not an ELF object"))
    }
    var ehdr = GElf_Ehdr()
    guard gelf_getehdr(elf, &ehdr) != nil else {
      return .failure(.truncated(path: path, detail: "the ELF header is incomplete (\(size) bytes)"))
    }
    let cls: ELFClass
    switch gelf_getclass(elf) {
    case ELFCLASS32: cls = .elf32
    case ELFCLASS64: cls = .elf64
    default: return .failure(.malformed(path: path, detail: "unknown ELF class"))
    }
    guard ehdr.e_type == UInt16(ET_DYN) else {
      return .failure(.notSharedObject(path: path, fileType: ehdr.e_type))
    }
    // Every header is checked against the file before any section is read through another.
    let table: ELFSectionTable
    switch ELFSectionTable.read(elf, path: path, fileSize: size) {
    case .failure(let e): return .failure(e)
    case .success(let t): table = t
    }
    var symbols = SymbolTable()
    // The section `.dynsym` names its symbols from; `.dynamic` usually links the same one.
    var symbolNames: (section: Int, table: StringTable)?
    var dynamic = DynamicEntries()
    switch table.unique(UInt32(SHT_DYNSYM), ".dynsym") {
    case .failure(let e): return .failure(e)
    case .success(let s?):
      switch readSymbols(table, s) {
      case .success(let t):
        symbols = t
        symbolNames = (Int(s.link), StringTable(bytes: t.names))
      case .failure(let e): return .failure(e)
      }
    case .success(nil): break
    }
    switch table.unique(UInt32(SHT_DYNAMIC), ".dynamic") {
    case .failure(let e): return .failure(e)
    case .success(let s?):
      switch readDynamic(table, s, reusing: symbolNames) {
      case .success(let d): dynamic = d
      case .failure(let e): return .failure(e)
      }
    case .success(nil): break
    }
    let embedded: [UInt8]?
    switch readEmbeddedManifest(table) {
    case .success(let m): embedded = m
    case .failure(let e): return .failure(e)
    }
    return .success(
      ELFFacts(
        path: path, fileSize: size, elfClass: cls, machine: ELFMachine(rawValue: ehdr.e_machine),
        isSharedObject: true, symbolTable: symbols, embeddedManifest: embedded,
        neededLibraries: dynamic.needed, searchPaths: dynamic.searchPaths,
        hasSymbolTable: table.sections.contains { $0.type == UInt32(SHT_SYMTAB) },
        isPositionIndependentExecutable: dynamic.isPositionIndependentExecutable))
  }

  private static func readSymbols(_ table: ELFSectionTable, _ section: ELFSection) -> Result<
    SymbolTable, BinaryError
  > {
    let what = ".dynsym"
    let entry: Int
    let data: UnsafeMutablePointer<Elf_Data>
    let names: StringTable
    switch table.entries(section, of: ELF_T_SYM, what) {
    case .failure(let e): return .failure(e)
    case .success(let t): (entry, data) = (t.size, t.data)
    }
    // Names stay in one copy of the linked string table; no string is made per symbol.
    switch table.linked(from: section, what).flatMap({ table.strings($0, "\(what)'s string table") }) {
    case .failure(let e): return .failure(e)
    case .success(let s): names = s
    }
    // Count from the data libelf actually read, not from the header's claim; gelf_getsym takes
    // an Int32 index.
    let count = min(data.pointee.d_size / entry, Int(Int32.max))
    let versions: [UInt16]?
    switch SymbolVersions.indexes(table, symbols: section, count: count) {
    case .failure(let e): return .failure(e)
    case .success(let v): versions = v
    }
    let versionNames: [UInt16: String]
    switch SymbolVersions.names(table) {
    case .failure(let e): return .failure(e)
    case .success(let n): versionNames = n
    }
    let versionNeeds: [VersionNeed]
    switch SymbolVersions.needs(table) {
    case .failure(let e): return .failure(e)
    case .success(let n): versionNeeds = n
    }
    var entries: [SymbolTable.Entry] = []
    entries.reserveCapacity(min(count, 1 << 16))
    var sym = GElf_Sym()
    for i in 0..<count {
      guard let ndx = Int32(exactly: i), gelf_getsym(data, ndx, &sym) != nil else { continue }
      // Offset 0 is the empty name; at or past the final NUL is a lie.
      guard sym.st_name != 0, UInt64(sym.st_name) < UInt64(names.bytes.count - 1) else { continue }
      let kind: DynamicSymbol.Kind =
        switch Int32(forsetti_sym_type(&sym)) {
        case STT_FUNC, STT_GNU_IFUNC: .function
        case STT_OBJECT: .object
        default: .other
        }
      let binding: DynamicSymbol.Binding =
        switch Int32(forsetti_sym_bind(&sym)) {
        case STB_LOCAL: .local
        case STB_GLOBAL: .global
        case STB_WEAK: .weak
        default: .other
        }
      let vis = Int32(forsetti_sym_visibility(&sym))
      entries.append(
        SymbolTable.Entry(
          nameOffset: sym.st_name, kind: kind, binding: binding, isDefined: sym.st_shndx != UInt16(SHN_UNDEF),
          isVisible: vis == STV_DEFAULT || vis == STV_PROTECTED,
          versionIndex: versions.map { $0[i] } ?? SymbolTable.Entry.unversioned))
    }
    return .success(
      SymbolTable(
        names: names.bytes, entries: entries, versionNames: versionNames, versionNeeds: versionNeeds))
  }

  /// What `.dynamic` says of the libraries a file needs and where the loader looks for them.
  private struct DynamicEntries {
    var needed: [String] = []
    var searchPaths = LibrarySearchPaths()
    var isPositionIndependentExecutable = false
  }

  /// `reusing` is a string table already read and checked, taken when `.dynamic` links the
  /// same section instead of copying it again.
  private static func readDynamic(
    _ table: ELFSectionTable, _ section: ELFSection, reusing read: (section: Int, table: StringTable)?
  ) -> Result<DynamicEntries, BinaryError> {
    let what = ".dynamic"
    let entry: Int
    let data: UnsafeMutablePointer<Elf_Data>
    switch table.entries(section, of: ELF_T_DYN, what) {
    case .failure(let e): return .failure(e)
    case .success(let t): (entry, data) = (t.size, t.data)
    }
    // The names are read only if some entry needs them: a .dynamic with no DT_NEEDED may link
    // to nothing usable.
    var strings: Result<StringTable, BinaryError>?
    var out = DynamicEntries()
    var dyn = GElf_Dyn()
    for i in 0..<min(data.pointee.d_size / entry, Int(Int32.max)) {
      guard let ndx = Int32(exactly: i), gelf_getdyn(data, ndx, &dyn) != nil else { break }
      let tag = dyn.d_tag
      if tag == Int64(DT_NULL) { break }
      if tag == Int64(DT_FLAGS_1) {
        out.searchPaths.noDefaultLibraries = dyn.d_un.d_val & UInt64(DF_1_NODEFLIB) != 0
        out.isPositionIndependentExecutable = dyn.d_un.d_val & UInt64(DF_1_PIE) != 0
        continue
      }
      guard tag == Int64(DT_NEEDED) || tag == Int64(DT_RUNPATH) || tag == Int64(DT_RPATH) else { continue }
      if strings == nil {
        strings = table.linked(from: section, what).flatMap { linked in
          if let read, read.section == linked.index { return .success(read.table) }
          return table.strings(linked, "\(what)'s string table")
        }
      }
      switch strings {
      case .failure(let e)?: return .failure(e)
      case .success(let s)?:
        // An offset outside the table names nothing; the loader would fail on a library so
        // named, and the load step reports that.
        guard let name = s.string(at: dyn.d_un.d_val) else { continue }
        switch tag {
        case Int64(DT_NEEDED): out.needed.append(name)
        case Int64(DT_RUNPATH): out.searchPaths.runPath = name
        default: out.searchPaths.rPath = name
        }
      case nil: break
      }
    }
    return .success(out)
  }

  /// The `.forsetti.manifest` section's bytes, trailing NULs removed; nil when there is none.
  private static func readEmbeddedManifest(_ table: ELFSectionTable) -> Result<[UInt8]?, BinaryError> {
    var shstrndx = 0
    guard elf_getshdrstrndx(table.elf, &shstrndx) == 0 else {
      return .failure(.malformed(path: table.path, detail: "no section name table: \(lastError())"))
    }
    // A file with no section names has no manifest section; only a name table that is
    // there but broken is an error.
    guard shstrndx > 0, shstrndx < table.sections.count else { return .success(nil) }
    let names: RawStringTable
    switch table.rawStrings(table.sections[shstrndx], "the section name table") {
    case .failure(let e): return .failure(e)
    case .success(let s): names = s
    }
    for section in table.sections
    where section.hasContents && section.size <= maxEmbeddedManifest
      && names.equals(UInt64(section.nameOffset), manifestSectionBytes)
    {
      switch table.data(section, manifestSection) {
      case .failure(let e): return .failure(e)
      case .success(let data):
        guard let buf = data.pointee.d_buf else { return .success([]) }
        var bytes = Array(UnsafeRawBufferPointer(start: buf, count: data.pointee.d_size))
        while bytes.last == 0 { bytes.removeLast() }
        return .success(bytes)
      }
    }
    return .success(nil)
  }
}
