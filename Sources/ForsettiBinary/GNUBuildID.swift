import CLibElf
import Glibc

/// The GNU build-id of an ELF file: the linker's hash of what it linked, which names one build
/// (what `readelf -n` shows as "Build ID", and what debuggers match debug information by).
public enum GNUBuildID {
  private static let libelfReady: Bool = elf_version(UInt32(EV_CURRENT)) != UInt32(EV_NONE)

  /// The `NT_GNU_BUILD_ID` note of the ELF file at `path`, of any type (executables too); nil
  /// when the file has none. Read through the same checked section table as modules are.
  public static func read(_ path: String) -> Result<[UInt8]?, BinaryError> {
    guard libelfReady else {
      return .failure(.malformed(path: path, detail: "libelf could not be initialised"))
    }
    let image: FileImage
    switch FileImage.open(path, name: path, relativeTo: AT_FDCWD) {
    case .success(let i): image = i
    case .failure(let e): return .failure(e)
    }
    defer { image.release() }
    let elf: OpaquePointer?
    let size: Int
    switch image.storage {
    case .memory(let base, let count):
      (elf, size) = (base.flatMap { elf_memory($0, count) }, count)
    case .descriptor(let fd, let s):
      (elf, size) = (elf_begin(fd, ELF_C_READ, nil), s)
    }
    guard let elf, elf_kind(elf) == ELF_K_ELF else {
      return .failure(.malformed(path: path, detail: "not an ELF object"))
    }
    defer { elf_end(elf) }
    let table: ELFSectionTable
    switch ELFSectionTable.read(elf, path: path, fileSize: size) {
    case .failure(let e): return .failure(e)
    case .success(let t): table = t
    }
    for section in table.all(ofType: UInt32(SHT_NOTE)) {
      let data: UnsafeMutablePointer<Elf_Data>
      switch table.data(section, "note section") {
      case .failure(let e): return .failure(e)
      case .success(let d): data = d
      }
      if let id = buildID(in: data) { return .success(id) }
    }
    return .success(nil)
  }

  /// The build-id among the notes of one section: the note named "GNU" of type
  /// `NT_GNU_BUILD_ID`.
  private static func buildID(in data: UnsafeMutablePointer<Elf_Data>) -> [UInt8]? {
    guard let base = data.pointee.d_buf else { return nil }
    let bytes = UnsafeRawBufferPointer(start: base, count: data.pointee.d_size)
    var offset = 0
    var header = GElf_Nhdr()
    var nameOffset = 0
    var descriptorOffset = 0
    while offset < bytes.count {
      // gelf_getnote checks each note's sizes against the section; 0 means the rest is unreadable.
      let next = gelf_getnote(data, offset, &header, &nameOffset, &descriptorOffset)
      let nameEnd = nameOffset + Int(header.n_namesz)
      let descriptorEnd = descriptorOffset + Int(header.n_descsz)
      guard next > offset, nameEnd <= bytes.count, descriptorEnd <= bytes.count else { return nil }
      let name = Array(bytes[nameOffset..<nameEnd])
      if header.n_type == UInt32(NT_GNU_BUILD_ID), name == Array("GNU\0".utf8) {
        return Array(bytes[descriptorOffset..<descriptorEnd])
      }
      offset = next
    }
    return nil
  }
}
