import Glibc

/// Directory listings and whole-file reads and writes with plain POSIX calls: the layers below the
/// runtime, and the confined worker that links them, do without Foundation.
public enum PlainFiles {
  /// The names in `directory`, without `.` and `..`, in directory order; nil if it cannot be listed.
  public static func names(in directory: String) -> [String]? {
    guard let dir = opendir(directory) else { return nil }
    defer { closedir(dir) }
    var out: [String] = []
    while let entry = readdir(dir) {
      let name = withUnsafePointer(to: &entry.pointee.d_name) { name in
        // In place: the record is only as long as its name, not the 256 bytes of d_name.
        String(cString: UnsafeRawPointer(name).assumingMemoryBound(to: CChar.self))
      }
      if name != "." && name != ".." { out.append(name) }
    }
    return out
  }

  public enum ReadError: Error, Sendable, Equatable {
    /// An errno from open, fstat or read.
    case system(Int32)
    case notRegularFile
    case tooLarge
  }

  /// The bytes of the regular file at `path` (relative to the open `directory`, if given), at
  /// most `limit` of them.
  public static func read(_ path: String, limit: Int, relativeTo directory: Int32 = AT_FDCWD) -> Result<
    [UInt8], ReadError
  > {
    let fd = openat(directory, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
    guard fd >= 0 else { return .failure(.system(errno)) }
    defer { close(fd) }
    var st = stat()
    guard fstat(fd, &st) == 0 else { return .failure(.system(errno)) }
    guard (st.st_mode & S_IFMT) == S_IFREG else { return .failure(.notRegularFile) }
    guard Int(st.st_size) <= limit else { return .failure(.tooLarge) }
    var bytes = [UInt8](repeating: 0, count: max(Int(st.st_size), 0) + 1)
    var total = 0
    while true {
      if total == bytes.count {
        guard total <= limit else { return .failure(.tooLarge) }
        bytes += [UInt8](repeating: 0, count: max(4096, total))
      }
      let n = bytes.withUnsafeMutableBytes { buf in
        buf.baseAddress.map { Glibc.read(fd, $0 + total, buf.count - total) } ?? -1
      }
      if n < 0 {
        if errno == EINTR { continue }
        return .failure(.system(errno))
      }
      if n == 0 { break }
      total += n
      // A regular file reads short only at its end: no second call just to see 0.
      if total < bytes.count { break }
    }
    guard total <= limit else { return .failure(.tooLarge) }
    bytes.removeSubrange(total...)
    return .success(bytes)
  }

  /// The bytes of the regular file at `path`, or nil if it cannot be read or exceeds `limit`.
  public static func contents(of path: String, limit: Int = 1 << 30) -> [UInt8]? {
    try? read(path, limit: limit).get()
  }

  /// Writes `bytes` to a temporary file beside `path`, syncs it and renames it over `path`, so
  /// a reader sees the old file or the new one, never a part. False on any failure.
  public static func writeAtomically(_ bytes: [UInt8], to path: String, mode: mode_t = 0o644) -> Bool {
    // A name nobody can guess and a file that must not exist yet: a plugin directory may be
    // shared, and a planted symbolic link must not redirect the write.
    let temporary = path + ".tmp-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
    let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
    guard fd >= 0 else { return false }
    var written = 0
    while written < bytes.count {
      let n = bytes.withUnsafeBytes { buf in
        buf.baseAddress.map { write(fd, $0 + written, buf.count - written) } ?? -1
      }
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else {
        close(fd)
        unlink(temporary)
        return false
      }
      written += n
    }
    let synced = fsync(fd) == 0
    let closed = close(fd) == 0
    guard synced, closed, rename(temporary, path) == 0 else {
      unlink(temporary)
      return false
    }
    return true
  }
}
