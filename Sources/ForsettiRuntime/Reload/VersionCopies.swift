import CForsettiSys
import ForsettiBinary
import ForsettiBridge
import FoundationEssentials
import Glibc

/// The copy each version of a module is loaded from. Loading from a copy gives every version its
/// own file (the dynamic loader matches images by device and inode, so a hardlink or the same
/// path would hand back the old image) and keeps the previous version loadable after its file
/// has been replaced.
///
/// Into the host process: a sealed memory copy (memfd), opened through `/proc/self/fd/N`. Into a
/// worker: a content-named copy under `STATE/versions/<moduleID>/`, a path the worker may read
/// under its Landlock rules.
package enum VersionCopies {
  /// A content-named copy of `path` on disk, for a worker to load. `facts`, the binary's ELF
  /// facts, say whether it finds libraries through `$ORIGIN`: then the copy gets a directory of
  /// its own that mirrors them (`originMirror`).
  package static func copy(_ path: String, moduleID: String, stateDirectory: String, facts: ELFFacts? = nil)
    -> Result<String, AtomicFile.WriteError>
  {
    guard let data = FileManager.default.contents(atPath: path),
      let identity = BinaryIdentity.of(path, contents: data)
    else {
      return .failure(.failed(path: path, step: "read", errno: errno))
    }
    let dir = PathText.join(stateDirectory, "versions/\(moduleID)")
    let hash = String(identity.hash, radix: 16)
    let mirror = facts.map { originMirror($0, path: path) } ?? []
    if !mirror.isEmpty {
      return mirroredCopy(data, of: path, into: PathText.join(dir, hash), mirror: mirror)
    }
    let target = PathText.join(dir, hash + "-" + PathText.name(path))
    if FileManager.default.fileExists(atPath: target) { return .success(target) }
    // A cache of the binary: complete or absent (rename), but no fsync on the reload path.
    do { try AtomicFile.write([UInt8](data), to: target, mode: 0o755, durable: false) } catch {
      return .failure(error)
    }
    return .success(target)
  }

  /// Whether the binary's `DT_RUNPATH` or `DT_RPATH` names `$ORIGIN`.
  package static func usesOrigin(_ facts: ELFFacts) -> Bool {
    [facts.searchPaths.runPath, facts.searchPaths.rPath].contains {
      $0?.contains("$ORIGIN") == true || $0?.contains("${ORIGIN}") == true
    }
  }

  /// A library the binary finds beside or below itself through `$ORIGIN`: where it is relative to
  /// the binary's directory, and the file.
  package struct MirroredLibrary: Sendable, Hashable {
    package var relativePath: String
    package var target: String
  }

  /// The libraries `path` finds through a `DT_RUNPATH`/`DT_RPATH` under its own directory. The
  /// loader expands `$ORIGIN` from the path an object was opened by, so a copy loaded from
  /// elsewhere would look beside the copy: the copy's directory gets a link to each, at the
  /// same relative path (their own `$ORIGIN` then resolves there too, and is mirrored alike).
  /// Libraries above the binary's directory (`$ORIGIN/../lib`) are not mirrored: a module
  /// that needs one fails to load with the loader's message, and `explain` lists it.
  package static func originMirror(_ facts: ELFFacts, path: String) -> [MirroredLibrary] {
    guard usesOrigin(facts) else { return [] }
    let base = PathText.parent(path)
    guard base.hasPrefix("/") else { return [] }
    let resolution = LibraryResolver(cache: LoaderCache.system()).resolve(facts, path: path)
    var out: [MirroredLibrary] = []
    for f in resolution.found where f.source == .runPath || f.source == .rPath {
      guard let relative = relativeBelow(base, f.path) else { continue }
      out.append(MirroredLibrary(relativePath: relative, target: f.realPath))
    }
    return out
  }

  /// `path` relative to `base` when it lies below it, `.` and `..` taken lexically (as the
  /// loader's string expansion leaves them); nil otherwise.
  static func relativeBelow(_ base: String, _ path: String) -> String? {
    var parts: [Substring] = []
    for part in path.split(separator: "/") {
      switch part {
      case ".": continue
      case "..": if parts.popLast() == nil { return nil }
      default: parts.append(part)
      }
    }
    let baseParts = base.split(separator: "/")
    guard parts.count > baseParts.count, Array(parts.prefix(baseParts.count)) == baseParts else { return nil }
    return parts.dropFirst(baseParts.count).joined(separator: "/")
  }

  /// The copy in a directory of its own, with a symbolic link for each mirrored library, made
  /// under a temporary name and renamed into place: complete or absent.
  static func mirroredCopy(
    _ data: Data, of path: String, into versionDirectory: String, mirror: [MirroredLibrary]
  )
    -> Result<String, AtomicFile.WriteError>
  {
    let target = PathText.join(versionDirectory, PathText.name(path))
    if FileManager.default.fileExists(atPath: target) { return .success(target) }
    let staging = versionDirectory + ".tmp-\(getpid())"
    let fm = FileManager.default
    try? fm.removeItem(atPath: staging)
    do {
      try AtomicFile.write(
        [UInt8](data), to: PathText.join(staging, PathText.name(path)), mode: 0o755, durable: false)
    } catch {
      return .failure(error)
    }
    for library in mirror {
      let link = PathText.join(staging, library.relativePath)
      do {
        try fm.createDirectory(atPath: PathText.parent(link), withIntermediateDirectories: true)
        try fm.createSymbolicLink(atPath: link, withDestinationPath: library.target)
      } catch {
        try? fm.removeItem(atPath: staging)
        return .failure(.failed(path: link, step: "symlink", errno: EIO))
      }
    }
    if rename(staging, versionDirectory) != 0 {
      let e = errno
      try? fm.removeItem(atPath: staging)
      // Another host made the same version's directory first: the same content, use it.
      guard fm.fileExists(atPath: target) else {
        return .failure(.failed(path: versionDirectory, step: "rename", errno: e))
      }
    }
    return .success(target)
  }

  /// Why a memory copy could not be made.
  package enum MemoryCopyError: Error, Equatable, CustomStringConvertible {
    case failed(path: String, errno: Int32)

    package var description: String {
      switch self {
      case .failed(let path, let e): "could not copy \(path) into memory: \(String(cString: strerror(e)))"
      }
    }
  }

  /// Larger binaries go to disk: a memory copy lives in RAM (or swap) for the host's life.
  static let memoryCopyLimit: Int64 = 1 << 30

  /// A sealed memory copy of `path` for `dlopen` in this process: `/proc/self/fd/N`. Each call
  /// makes a new one, so every version is a new image, without hashing the file or writing it
  /// to disk (about a third of a reload's time went there).
  ///
  /// The descriptor is never closed, on purpose: the image mapped from it is never unloaded
  /// either (see `DynamicLoader`), and the loader finds an image already loaded by its path
  /// before anything else, so a closed and reused descriptor number would hand back the old
  /// image under a new version's name. A rollback reopens the same path and gets the old
  /// version's image, as it should.
  package static func inMemory(_ path: String, moduleID: String) -> Result<String, MemoryCopyError> {
    let name = "forsetti:\(moduleID):\(PathText.name(path))"
    let fd = forsetti_memfd_copy(path, name, memoryCopyLimit)
    guard fd >= 0 else { return .failure(.failed(path: path, errno: errno)) }
    let proc = "/proc/self/fd/\(fd)"
    // Without /proc mounted the loader could not open it: no copy, the caller uses the disk.
    guard access(proc, R_OK) == 0 else {
      let e = errno
      close(fd)
      return .failure(.failed(path: proc, errno: e))
    }
    return .success(proc)
  }
}
