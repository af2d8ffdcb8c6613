import CForsettiSys
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
public enum VersionCopies {
  /// A content-named copy of `path` on disk, for a worker to load.
  public static func copy(_ path: String, moduleID: String, stateDirectory: String) -> Result<
    String, AtomicFile.WriteError
  > {
    guard let data = FileManager.default.contents(atPath: path),
      let identity = BinaryIdentity.of(path, contents: data)
    else {
      return .failure(.failed(path: path, step: "read", errno: errno))
    }
    let dir = PathText.join(stateDirectory, "versions/\(moduleID)")
    let name = String(identity.hash, radix: 16) + "-" + PathText.name(path)
    let target = PathText.join(dir, name)
    if FileManager.default.fileExists(atPath: target) { return .success(target) }
    // A cache of the binary: complete or absent (rename), but no fsync on the reload path.
    do { try AtomicFile.write([UInt8](data), to: target, mode: 0o755, durable: false) } catch {
      return .failure(error)
    }
    return .success(target)
  }

  /// Why a memory copy could not be made.
  public enum MemoryCopyError: Error, Equatable, CustomStringConvertible {
    case failed(path: String, errno: Int32)

    public var description: String {
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
  public static func inMemory(_ path: String, moduleID: String) -> Result<String, MemoryCopyError> {
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
