import Glibc

/// The dynamic loader's cache (`/etc/ld.so.cache`, written by `ldconfig`): which file the loader
/// maps for a library name, per ELF class and machine. Read as glibc reads it; the file is the
/// system's, but it is parsed as untrusted bytes all the same (bounds checked, fuzzed).
public struct LoaderCache: Sendable, Hashable {
  /// One entry: a library name (`libc.so.6`) and the path the loader maps for it.
  public struct Entry: Sendable, Hashable {
    public var name: String
    public var path: String
    /// glibc's entry flags: the file type (`FLAG_ELF_LIBC6`) and the architecture bits.
    public var flags: Int32
    /// Non-zero for an entry in a `glibc-hwcaps` subdirectory, chosen only on CPUs with it.
    public var hwcap: UInt64
  }

  public var entries: [Entry]

  /// Where glibc keeps it.
  public static let systemPath = "/etc/ld.so.cache"

  static let oldMagic = Array("ld.so-1.7.0".utf8)
  static let newMagic = Array("glibc-ld.so.cache1.1".utf8)
  /// `struct cache_file` (old format): magic[11], then `nlibs` aligned to 4.
  static let oldHeader = 16
  /// `struct file_entry` (old format): flags, key, value.
  static let oldEntry = 12
  /// `struct cache_file_new`: magic and version (20), nlibs, len_strings, flags and padding,
  /// extension_offset, unused[3].
  static let newHeader = 48
  /// `struct file_entry_new`: flags, key, value, osversion, hwcap.
  static let newEntry = 24
  /// More entries than any system has: a larger count is a damaged file.
  static let maxEntries = 1 << 20

  public init(entries: [Entry]) { self.entries = entries }

  /// The cache in `bytes`; nil when they are no cache the loader reads (the resolver then
  /// searches the default directories only, as the loader does). Like glibc's loader, this
  /// takes the new table when there is one, else the old: a file of the old format alone
  /// (`ldconfig -c old`), or an old table followed by a new one (`-c compat`).
  public init?(bytes: [UInt8]) {
    var newBase = 0
    var oldTable: (count: Int, strings: Int)?
    if bytes.starts(with: Self.oldMagic) {
      guard let count = Self.u32(bytes, at: Self.oldMagic.count + 1) else { return nil }
      let (size, o1) = Int(count).multipliedReportingOverflow(by: Self.oldEntry)
      let (end, o2) = Self.oldHeader.addingReportingOverflow(size)
      guard !o1, !o2, end <= bytes.count else { return nil }
      oldTable = (Int(count), end)
      // The new table, when appended, starts at the next multiple of its 8-byte alignment.
      newBase = (end + 7) & ~7
    }
    if let entries = Self.newTable(bytes, at: newBase) {
      self.entries = entries
    } else if let oldTable {
      self.entries = Self.oldTable(bytes, count: oldTable.count, strings: oldTable.strings)
    } else {
      return nil
    }
  }

  /// The entries of a new-format table at `base`; nil when there is none there, or it is
  /// damaged, or of the other byte order. Its strings count from `base`.
  private static func newTable(_ bytes: [UInt8], at base: Int) -> [Entry]? {
    guard base <= bytes.count, bytes[base...].starts(with: newMagic),
      let count = u32(bytes, at: base + 20), Int(count) <= maxEntries,
      base + newHeader + Int(count) * newEntry <= bytes.count
    else { return nil }
    // `flags`' low two bits: 0 unset (older ldconfig), 2 little-endian, 3 big-endian; the
    // loader ignores a cache of the other byte order.
    let endian = bytes[base + 28] & 3
    guard endian == 0 || endian == (1.littleEndian == 1 ? 2 : 3) else { return nil }
    var entries: [Entry] = []
    entries.reserveCapacity(Int(count))
    for i in 0..<Int(count) {
      let at = base + newHeader + i * newEntry
      guard let flags = u32(bytes, at: at), let key = u32(bytes, at: at + 4),
        let value = u32(bytes, at: at + 8), let hwcap = u64(bytes, at: at + 16)
      else { return nil }
      // An entry whose strings lie outside the file names nothing; the loader skips it too.
      guard let name = string(bytes, at: base + Int(key)), let path = string(bytes, at: base + Int(value))
      else { continue }
      entries.append(Entry(name: name, path: path, flags: Int32(bitPattern: flags), hwcap: hwcap))
    }
    return entries
  }

  /// The entries of the old-format table: `count` entries after the header, their strings
  /// counting from `strings`, where the entries end.
  private static func oldTable(_ bytes: [UInt8], count: Int, strings: Int) -> [Entry] {
    var entries: [Entry] = []
    entries.reserveCapacity(count)
    for i in 0..<count {
      let at = oldHeader + i * oldEntry
      guard let flags = u32(bytes, at: at), let key = u32(bytes, at: at + 4),
        let value = u32(bytes, at: at + 8),
        let name = string(bytes, at: strings + Int(key)), let path = string(bytes, at: strings + Int(value))
      else { continue }
      entries.append(Entry(name: name, path: path, flags: Int32(bitPattern: flags), hwcap: 0))
    }
    return entries
  }

  /// The system's cache, or nil when it is missing or unreadable.
  public static func system(path: String = systemPath) -> LoaderCache? {
    guard let bytes = FileBytes.read(path, limit: 64 << 20) else { return nil }
    return LoaderCache(bytes: bytes)
  }

  /// The glibc cache flags of libraries of `elfClass`/`machine` (type `FLAG_ELF_LIBC6` plus
  /// the architecture bits from glibc's `dl-cache.h`); nil for machines whose bits are not
  /// known here: the resolver then skips the cache and searches the default directories.
  public static func flags(elfClass: ELFClass, machine: ELFMachine) -> Int32? {
    let libc6: Int32 = 0x0003
    switch (elfClass, machine) {
    case (.elf64, .x86_64): return libc6 | 0x0300  // FLAG_X8664_LIB64
    case (.elf64, .aarch64): return libc6 | 0x0a00  // FLAG_AARCH64_LIB64
    case (.elf64, .riscv): return libc6 | 0x1000  // FLAG_RISCV_FLOAT_ABI_DOUBLE
    // The hard-float loader (Debian's armhf) takes only entries marked hard-float.
    case (.elf32, .arm): return libc6 | 0x0900  // FLAG_ARM_LIBHF
    case (.elf32, .x86): return libc6
    default: return nil
    }
  }

  /// The path the loader takes for `name` among entries of `flags`: the first plain entry,
  /// else the first in a `glibc-hwcaps` subdirectory. (The loader prefers the subdirectory of
  /// the best level this CPU has; ldconfig puts it beneath the plain entry's directory, which
  /// a grant of that directory covers.)
  public func path(for name: String, flags: Int32) -> String? {
    var hwcapPath: String?
    for e in entries where e.name == name && e.flags == flags {
      if e.hwcap == 0 { return e.path }
      if hwcapPath == nil { hwcapPath = e.path }
    }
    return hwcapPath
  }

  private static func u32(_ b: [UInt8], at i: Int) -> UInt32? {
    guard i >= 0, i <= b.count - 4 else { return nil }
    return UInt32(b[i]) | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2]) << 16 | UInt32(b[i + 3]) << 24
  }

  private static func u64(_ b: [UInt8], at i: Int) -> UInt64? {
    guard let lo = u32(b, at: i), let hi = u32(b, at: i + 4) else { return nil }
    return UInt64(lo) | UInt64(hi) << 32
  }

  /// The NUL-terminated UTF-8 string at `i`; nil when it runs off the end or is no UTF-8.
  private static func string(_ b: [UInt8], at i: Int) -> String? {
    guard i >= 0, i < b.count, let end = b[i...].firstIndex(of: 0) else { return nil }
    return String(validating: b[i..<end], as: UTF8.self)
  }
}

/// Reads a whole small file.
enum FileBytes {
  /// The bytes of `path`, or nil when it cannot be read or is larger than `limit`.
  static func read(_ path: String, limit: Int) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var st = stat()
    guard fstat(fd, &st) == 0, st.st_size >= 0, st.st_size <= limit else { return nil }
    var out = [UInt8](repeating: 0, count: Int(st.st_size))
    var got = 0
    while got < out.count {
      let n = out.withUnsafeMutableBytes {
        pread(fd, $0.baseAddress.map { $0 + got }, $0.count - got, off_t(got))
      }
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { break }
      got += n
    }
    return got == out.count ? out : nil
  }
}
