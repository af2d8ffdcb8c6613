import CLibElf
import Glibc

/// Reads ELF facts with libelf. No code of the file runs: it is read, never mapped executable.
public enum ELFInspector {
  /// The `.forsetti.manifest` section name modules may use to embed their manifest.
  public static let manifestSection = ".forsetti.manifest"
  /// The name as a C string, made once: converting per section showed in profiles.
  private static let manifestSectionC = Array(manifestSection.utf8CString)
  /// Embedded manifests larger than this are ignored as implausible.
  static let maxEmbeddedManifest = 1 << 20

  private static let libelfReady: Bool = elf_version(UInt32(EV_CURRENT)) != UInt32(EV_NONE)

  /// Inspects the file at `path`.
  public static func inspect(_ path: String) -> Result<ELFFacts, BinaryError> {
    guard libelfReady else {
      return .failure(.malformed(path: path, detail: "libelf could not be initialised"))
    }
    let image: FileImage
    switch FileImage.open(path) {
    case .success(let i): image = i
    case .failure(let e): return .failure(e)
    }
    defer { image.release() }
    let bytes = image.bytes
    guard bytes.count >= 4, bytes[0] == 0x7F, bytes[1] == 0x45, bytes[2] == 0x4C, bytes[3] == 0x46 else {
      let head = bytes.prefix(4).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined(separator: " ")
      return .failure(.notELF(path: path, leadingBytes: bytes.isEmpty ? "nothing: the file is empty" : head))
    }
    // libelf parses the image in memory: one read of the file instead of a pread per header,
    // section and string table.
    guard let base = image.mutableBase, let elf = elf_memory(base, bytes.count) else {
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

    // Header fields are untrusted: every sum is checked for overflow.
    let (table, o1) = UInt64(ehdr.e_shnum).multipliedReportingOverflow(by: UInt64(ehdr.e_shentsize))
    let (shEnd, o2) = UInt64(ehdr.e_shoff).addingReportingOverflow(table)
    if o1 || o2 || shEnd > UInt64(size) {
      return .failure(
        .truncated(
          path: path, detail: "the section table ends at byte \(shEnd) but the file has \(size) bytes"))
    }
    var shstrndx = 0
    guard elf_getshdrstrndx(elf, &shstrndx) == 0 else {
      return .failure(.malformed(path: path, detail: "no section name table: \(lastError())"))
    }

    var symbols = SymbolTable()
    var embedded: [UInt8]?
    var needed: [String] = []
    var scn = elf_nextscn(elf, nil)
    while let section = scn {
      defer { scn = elf_nextscn(elf, section) }
      var shdr = GElf_Shdr()
      guard gelf_getshdr(section, &shdr) != nil else {
        return .failure(.malformed(path: path, detail: "unreadable section header: \(lastError())"))
      }
      let (end, overflow) = shdr.sh_offset.addingReportingOverflow(shdr.sh_size)
      if shdr.sh_type != UInt32(SHT_NOBITS) && (overflow || end > UInt64(size)) {
        return .failure(
          .truncated(
            path: path,
            detail:
              "a section ends at byte \(overflow ? "past 2^64" : String(end)) but the file has \(size) bytes")
        )
      }
      switch shdr.sh_type {
      case UInt32(SHT_DYNSYM):
        switch readSymbols(elf, section, shdr, path: path) {
        case .success(let s): symbols = s
        case .failure(let e): return .failure(e)
        }
      case UInt32(SHT_DYNAMIC):
        needed = readNeeded(elf, section, shdr)
      default:
        guard shdr.sh_size <= UInt64(maxEmbeddedManifest),
          let name = elf_strptr(elf, shstrndx, Int(shdr.sh_name)),
          manifestSectionC.withUnsafeBufferPointer({ $0.baseAddress.map { strcmp(name, $0) == 0 } ?? false }),
          let data = elf_getdata(section, nil), let buf = data.pointee.d_buf
        else { continue }
        embedded = Array(UnsafeRawBufferPointer(start: buf, count: data.pointee.d_size))
        while embedded?.last == 0 { embedded?.removeLast() }
      }
    }
    return .success(
      ELFFacts(
        path: path, fileSize: size, elfClass: cls, machine: ELFMachine(rawValue: ehdr.e_machine),
        isSharedObject: true, symbolTable: symbols, embeddedManifest: embedded, neededLibraries: needed))
  }

  private static func readSymbols(
    _ elf: OpaquePointer, _ section: OpaquePointer, _ shdr: GElf_Shdr, path: String
  )
    -> Result<SymbolTable, BinaryError>
  {
    guard shdr.sh_entsize > 0, let data = elf_getdata(section, nil) else {
      return .failure(.malformed(path: path, detail: "unreadable .dynsym: \(lastError())"))
    }
    // Names stay in one copy of the linked string table; no string is made per symbol.
    var names: [UInt8] = []
    if let strings = elf_getscn(elf, Int(shdr.sh_link)), let sdata = elf_getdata(strings, nil),
      let sbuf = sdata.pointee.d_buf
    {
      names = Array(UnsafeRawBufferPointer(start: sbuf, count: sdata.pointee.d_size))
    }
    // A table whose last name runs off its end is cut there, as elf_strptr would refuse it.
    if names.last != 0 { names.append(0) }
    // Count from the data libelf actually read, not from the header's claim.
    let entry = max(Int(shdr.sh_entsize), gelf_fsize(elf, ELF_T_SYM, 1, UInt32(EV_CURRENT)))
    let count = min(data.pointee.d_size / max(entry, 1), Int(Int32.max))
    var entries: [SymbolTable.Entry] = []
    entries.reserveCapacity(min(count, 1 << 16))
    var sym = GElf_Sym()
    for i in 0..<count {
      guard gelf_getsym(data, Int32(i), &sym) != nil else { continue }
      // Offset 0 is the empty name; past the table is a lie.
      guard sym.st_name != 0, Int(sym.st_name) < names.count - 1 else { continue }
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
          isVisible: vis == STV_DEFAULT || vis == STV_PROTECTED))
    }
    return .success(SymbolTable(names: names, entries: entries))
  }

  private static func readNeeded(_ elf: OpaquePointer, _ section: OpaquePointer, _ shdr: GElf_Shdr)
    -> [String]
  {
    guard shdr.sh_entsize > 0, let data = elf_getdata(section, nil) else { return [] }
    var out: [String] = []
    var dyn = GElf_Dyn()
    let entry = max(Int(shdr.sh_entsize), gelf_fsize(elf, ELF_T_DYN, 1, UInt32(EV_CURRENT)))
    for i in 0..<min(data.pointee.d_size / max(entry, 1), Int(Int32.max)) {
      guard gelf_getdyn(data, Int32(i), &dyn) != nil else { break }
      if dyn.d_tag == Int64(DT_NULL) { break }
      if dyn.d_tag == Int64(DT_NEEDED), let offset = Int(exactly: dyn.d_un.d_val),
        let s = elf_strptr(elf, Int(shdr.sh_link), offset)
      {
        out.append(String(cString: s))
      }
    }
    return out
  }
}

/// A file's bytes in memory for libelf: read into a buffer when small, mapped (readable and
/// copy-on-write, never executable) when large, so a 50 MB module is not copied to find a
/// few tables.
struct FileImage {
  /// Files up to this size are read with one call; larger ones are mapped.
  static let readLimit = 1 << 18

  private let base: UnsafeMutableRawPointer?
  private let count: Int
  private let mapped: Bool

  var bytes: UnsafeBufferPointer<UInt8> {
    UnsafeBufferPointer(start: base?.assumingMemoryBound(to: UInt8.self), count: count)
  }

  var mutableBase: UnsafeMutablePointer<CChar>? { base?.assumingMemoryBound(to: CChar.self) }

  static func open(_ path: String) -> Result<FileImage, BinaryError> {
    func failure(_ why: String) -> Result<FileImage, BinaryError> {
      .failure(.unreadable(path: path, reason: why))
    }
    // O_NONBLOCK: a FIFO named *.so must not block the host; regular files ignore it.
    let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
    guard fd >= 0 else { return failure(String(cString: strerror(errno))) }
    defer { close(fd) }
    var st = stat()
    guard fstat(fd, &st) == 0 else { return failure(String(cString: strerror(errno))) }
    guard (st.st_mode & S_IFMT) == S_IFREG else { return failure("not a regular file") }
    let size = Int(st.st_size)
    if size == 0 { return .success(FileImage(base: nil, count: 0, mapped: false)) }
    if size > readLimit {
      let p = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0)
      guard let p, p != MAP_FAILED else { return failure(String(cString: strerror(errno))) }
      return .success(FileImage(base: p, count: size, mapped: true))
    }
    guard let buffer = malloc(size) else { return failure("out of memory for \(size) bytes") }
    var total = 0
    while total < size {
      let n = read(fd, buffer + total, size - total)
      if n < 0 && errno == EINTR { continue }
      if n <= 0 { break }
      total += n
    }
    // A file that shrank while being read is inspected as what was read: truncated, if so.
    return .success(FileImage(base: buffer, count: total, mapped: false))
  }

  func release() {
    guard let base else { return }
    if mapped { munmap(base, count) } else { free(base) }
  }
}
