import ForsettiBinary
import Glibc

/// Each module binary's `LibraryGrants`, worked out once per version of the file: resolving a
/// Swift module reads a dozen libraries with libelf, which a restart or a second start of the
/// same file need not repeat. A changed module file, or a changed `ld.so.cache`, is resolved
/// again. Used from the host's main thread only (`WorkerSupply`).
final class LibraryGrantCache {
  /// What identifies one version of a file: a replaced or rewritten one differs.
  struct Stamp: Hashable {
    var device: UInt64
    var inode: UInt64
    var size: Int64
    var modified: Int64

    init?(_ path: String) {
      var st = stat()
      guard stat(path, &st) == 0 else { return nil }
      device = UInt64(st.st_dev)
      inode = UInt64(st.st_ino)
      size = Int64(st.st_size)
      modified = Int64(st.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(st.st_mtim.tv_nsec)
    }
  }

  private var entries: [String: (stamp: Stamp, cache: Stamp?, grants: LibraryGrants)] = [:]
  private var loaderCache: (stamp: Stamp?, cache: LoaderCache?)?
  /// The directories modules write, which no grant may overlap.
  let protected: [String]

  init(protected: [String]) {
    self.protected = protected.map { LibraryResolver.realPath($0) ?? $0 }
  }

  /// The grants for the module binary at `path`; nil when it cannot be read (the load then
  /// fails and says why).
  func grants(for path: String) -> LibraryGrants? {
    guard let stamp = Stamp(path) else { return nil }
    let cacheStamp = Stamp(LoaderCache.systemPath)
    if let e = entries[path], e.stamp == stamp, e.cache == cacheStamp { return e.grants }
    guard case .success(let facts) = ELFInspector.inspect(path) else { return nil }
    if loaderCache == nil || loaderCache?.stamp != cacheStamp {
      loaderCache = (cacheStamp, LoaderCache.system())
    }
    let resolution = LibraryResolver(cache: loaderCache?.cache).resolve(facts, path: path)
    let grants = LibraryGrants.decide(resolution, protected: protected)
    entries[path] = (stamp, cacheStamp, grants)
    return grants
  }
}
