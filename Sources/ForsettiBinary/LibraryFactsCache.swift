import Glibc
import Synchronization

/// What libelf read of each library file, kept for the life of the process and read again when
/// the file changes (its device, inode, size or modification time): judging a thousand modules
/// that all need `libc.so.6` reads it once, not a thousand times (`BinaryCompatibility`).
public final class LibraryFactsCache: Sendable {
  /// The process's cache.
  public static let shared = LibraryFactsCache()

  /// Files kept at most; past it the cache starts over (a host sees tens of libraries).
  static let capacity = 4096

  private struct Identity: Equatable {
    var device: UInt64
    var inode: UInt64
    var size: Int64
    var modified: timespec

    static func == (a: Identity, b: Identity) -> Bool {
      a.device == b.device && a.inode == b.inode && a.size == b.size
        && a.modified.tv_sec == b.modified.tv_sec && a.modified.tv_nsec == b.modified.tv_nsec
    }
  }

  private let table = Mutex<[String: (Identity, Result<ELFFacts, BinaryError>)]>([:])

  public init() {}
  private let loaderCache = Mutex<(Identity, LoaderCache?)?>(nil)

  private static func identity(_ path: String) -> Identity? {
    var st = stat()
    guard stat(path, &st) == 0 else { return nil }
    return Identity(
      device: UInt64(st.st_dev), inode: UInt64(st.st_ino), size: Int64(st.st_size), modified: st.st_mtim)
  }

  /// `ELFInspector.inspect(path)`, from the cache while the file is unchanged.
  public func inspect(_ path: String) -> Result<ELFFacts, BinaryError> {
    guard let id = Self.identity(path) else { return ELFInspector.inspect(path) }
    if let (known, facts) = table.withLock({ $0[path] }), known == id { return facts }
    let facts = ELFInspector.inspect(path)
    table.withLock { t in
      if t.count >= Self.capacity { t.removeAll() }
      t[path] = (id, facts)
    }
    return facts
  }

  /// A resolver reading through this cache (the loader cache and every library's facts): what
  /// judges, lints, packs and explains a module uses, so none reads libc again.
  public func resolver() -> LibraryResolver { LibraryResolver(cache: systemLoaderCache(), inspect: inspect) }

  /// `/etc/ld.so.cache` as `LoaderCache.system()` reads it, read again when it changes.
  public func systemLoaderCache() -> LoaderCache? {
    let id = Self.identity(LoaderCache.systemPath)
    if let id, let (known, cache) = loaderCache.withLock({ $0 }), known == id { return cache }
    let cache = LoaderCache.system()
    if let id { loaderCache.withLock { $0 = (id, cache) } }
    return cache
  }
}
