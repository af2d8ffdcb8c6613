import ForsettiBridge
import Glibc

/// The file handling secure storage and module keys share: private directories (0700) that
/// are never symbolic links, and whole small files read without following a link.
enum SecureFiles {
  /// What reading a file gave.
  enum ReadOutcome: Sendable, Equatable {
    case bytes([UInt8])
    case missing
    /// Larger than the caller's limit: never read into memory.
    case tooLarge(Int)
    case failed(errno: Int32)
  }

  /// `path` and its missing ancestors as directories of mode 0700; an existing `path` must be
  /// a real directory (not a link to one), and is made 0700 if it was not.
  /// Returns nil or the errno of the step that failed.
  static func privateDirectory(_ path: String) -> Int32? {
    if mkdir(path, 0o700) != 0 {
      switch errno {
      case EEXIST: break
      case ENOENT:
        let parent = SandboxStorage.splitLast(path).parent
        guard !parent.isEmpty, parent != path else { return ENOENT }
        if let e = privateDirectory(parent) { return e }
        if mkdir(path, 0o700) != 0 && errno != EEXIST { return errno }
      default: return errno
      }
    }
    var st = stat()
    guard lstat(path, &st) == 0 else { return errno }
    guard st.st_mode & S_IFMT == S_IFDIR else { return ENOTDIR }
    if st.st_mode & 0o777 != 0o700, chmod(path, 0o700) != 0 { return errno }
    return nil
  }

  /// The whole of `path` if it is a regular file of at most `max` bytes; links are not followed.
  static func read(_ path: String, max: Int) -> ReadOutcome {
    let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
    guard fd >= 0 else { return errno == ENOENT ? .missing : .failed(errno: errno) }
    defer { close(fd) }
    var st = stat()
    guard fstat(fd, &st) == 0 else { return .failed(errno: errno) }
    guard st.st_mode & S_IFMT == S_IFREG else { return .failed(errno: EINVAL) }
    let size = Int(st.st_size)
    guard size <= max else { return .tooLarge(size) }
    var bytes = [UInt8](repeating: 0, count: size)
    var offset = 0
    while offset < size {
      let n = bytes.withUnsafeMutableBytes { b in
        pread(fd, b.baseAddress.map { $0 + offset }, size - offset, off_t(offset))
      }
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { return n == 0 ? .failed(errno: EIO) : .failed(errno: errno) }
      offset += n
    }
    return .bytes(bytes)
  }

  /// Syncs a directory so a rename or link in it survives a power loss.
  static func syncDirectory(_ path: String) {
    let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard fd >= 0 else { return }
    fsync(fd)
    close(fd)
  }

  static func describe(_ e: Int32) -> String { String(cString: strerror(e)) }
}
