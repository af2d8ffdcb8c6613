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

  /// The cache in `bytes`; nil when they are no cache of a format this glibc writes (the
  /// resolver then searches the default directories only, as the loader does).
  public init?(bytes: [UInt8]) {
    var base = 0
    if bytes.starts(with: Self.oldMagic) {
      // An old-format cache with the new one appended (glibc < 2.32's "compat" format): skip
      // the old table, then align to the new header's 8 bytes as ldconfig does.
      guard let count = Self.u32(bytes, at: 11 + 1) else { return nil }
      let (skip, o1) = Int(count).multipliedReportingOverflow(by: Self.oldEntry)
      let (end, o2) = Self.oldHeader.addingReportingOverflow(skip)
      guard !o1, !o2, end <= bytes.count else { return nil }
      base = (end + 7) & ~7
    }
    guard base <= bytes.count, bytes[base...].starts(with: Self.newMagic),
      let count = Self.u32(bytes, at: base + 20), Int(count) <= Self.maxEntries
    else { return nil }
    var entries: [Entry] = []
    entries.reserveCapacity(Int(count))
    for i in 0..<Int(count) {
      let at = base + Self.newHeader + i * Self.newEntry
      guard let flags = Self.u32(bytes, at: at), let key = Self.u32(bytes, at: at + 4),
        let value = Self.u32(bytes, at: at + 8), let hwcap = Self.u64(bytes, at: at + 16)
      else { return nil }
      // String offsets count from the new header (which is the file's start but in the
      // compat format).
      guard let name = Self.string(bytes, at: base + Int(key)),
        let path = Self.string(bytes, at: base + Int(value))
      else { continue }
      entries.append(Entry(name: name, path: path, flags: Int32(bitPattern: flags), hwcap: hwcap))
    }
    self.entries = entries
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
    case (.elf32, .x86), (.elf32, .arm): return libc6
    default: return nil
    }
  }

  /// The path the loader takes for `name` among entries of `flags`: the first plain entry,
  /// else the first in a `glibc-hwcaps` subdirectory.
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
