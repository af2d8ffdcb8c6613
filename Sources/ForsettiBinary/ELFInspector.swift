import CLibElf
import Glibc

/// Reads ELF facts with libelf. No code of the file runs: it is read, never mapped executable.
public enum ELFInspector {
  /// The `.forsetti.manifest` section name modules may use to embed their manifest.
  public static let manifestSection = ".forsetti.manifest"
  /// Embedded manifests larger than this are ignored as implausible.
  static let maxEmbeddedManifest = 1 << 20

  private static let libelfReady: Bool = elf_version(UInt32(EV_CURRENT)) != UInt32(EV_NONE)

  /// Inspects the file at `path`.
  public static func inspect(_ path: String) -> Result<ELFFacts, BinaryError> {
    guard libelfReady else {
      return .failure(.malformed(path: path, detail: "libelf could not be initialised"))
    }
    // O_NONBLOCK: a FIFO named *.so must not block the host; regular files ignore it.
    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
    guard fd >= 0 else { return .failure(.unreadable(path: path, reason: String(cString: strerror(errno)))) }
    defer { close(fd) }
    var st = stat()
    guard fstat(fd, &st) == 0 else {
      return .failure(.unreadable(path: path, reason: String(cString: strerror(errno))))
    }
    guard (st.st_mode & S_IFMT) == S_IFREG else {
      return .failure(.unreadable(path: path, reason: "not a regular file"))
    }
    let size = Int(st.st_size)

    var magic = [UInt8](repeating: 0, count: 4)
    let got = pread(fd, &magic, 4, 0)
    guard got == 4, magic == [0x7F, 0x45, 0x4C, 0x46] else {
      let head = magic.prefix(max(0, got)).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined(
        separator: " ")
      return .failure(.notELF(path: path, leadingBytes: got <= 0 ? "nothing: the file is empty" : head))
    }
    guard let elf = elf_begin(fd, ELF_C_READ, nil) else {
      return .failure(.malformed(path: path, detail: lastError()))
    }
    defer { elf_end(elf) }
    return facts(elf, path: path, size: size)
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

    var symbols: [DynamicSymbol] = []
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
      let name = elf_strptr(elf, shstrndx, Int(shdr.sh_name)).map { String(cString: $0) } ?? ""
      switch shdr.sh_type {
      case UInt32(SHT_DYNSYM):
        switch readSymbols(elf, section, shdr, path: path) {
        case .success(let s): symbols = s
        case .failure(let e): return .failure(e)
        }
      case UInt32(SHT_DYNAMIC):
        needed = readNeeded(elf, section, shdr)
      default:
        if name == manifestSection && shdr.sh_size <= UInt64(maxEmbeddedManifest),
          let data = elf_getdata(section, nil), let buf = data.pointee.d_buf
        {
          embedded = Array(UnsafeRawBufferPointer(start: buf, count: data.pointee.d_size))
          while embedded?.last == 0 { embedded?.removeLast() }
        }
      }
    }
    return .success(
      ELFFacts(
        path: path, fileSize: size, elfClass: cls, machine: ELFMachine(rawValue: ehdr.e_machine),
        isSharedObject: true, dynamicSymbols: symbols, embeddedManifest: embedded, neededLibraries: needed))
  }

  private static func readSymbols(
    _ elf: OpaquePointer, _ section: OpaquePointer, _ shdr: GElf_Shdr, path: String
  )
    -> Result<[DynamicSymbol], BinaryError>
  {
    guard shdr.sh_entsize > 0, let data = elf_getdata(section, nil) else {
      return .failure(.malformed(path: path, detail: "unreadable .dynsym: \(lastError())"))
    }
    // Count from the data libelf actually read, not from the header's claim.
    let entry = max(Int(shdr.sh_entsize), gelf_fsize(elf, ELF_T_SYM, 1, UInt32(EV_CURRENT)))
    let count = min(data.pointee.d_size / max(entry, 1), Int(Int32.max))
    var out: [DynamicSymbol] = []
    out.reserveCapacity(min(count, 1 << 16))
    var sym = GElf_Sym()
    for i in 0..<count {
      guard gelf_getsym(data, Int32(i), &sym) != nil else { continue }
      guard sym.st_name != 0, let cname = elf_strptr(elf, Int(shdr.sh_link), Int(sym.st_name)) else {
        continue
      }
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
      out.append(
        DynamicSymbol(
          name: String(cString: cname), kind: kind, binding: binding,
          isDefined: sym.st_shndx != UInt16(SHN_UNDEF),
          isVisible: vis == STV_DEFAULT || vis == STV_PROTECTED))
    }
    return .success(out)
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
