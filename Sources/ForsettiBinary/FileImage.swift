import Glibc

/// A file opened for libelf: small files are read into memory with one call; large ones are
/// left to libelf's on-demand reads, so a 50 MB module is not copied to find a few tables,
/// and a file truncated while it is inspected gives a read error, not the SIGBUS a mapping
/// would.
struct FileImage {
  /// Files up to this size are read with one call; larger ones are read by libelf as needed.
  static let readLimit = 1 << 18

  enum Storage {
    case memory(UnsafeMutablePointer<CChar>?, count: Int)
    case descriptor(Int32, size: Int)
  }

  let storage: Storage

  /// Opens `name` relative to the open `directory` (`AT_FDCWD`: the working directory), naming
  /// it `path` in errors.
  static func open(_ path: String, name: String, relativeTo directory: Int32) -> Result<
    FileImage, BinaryError
  > {
    func failure(_ why: String) -> Result<FileImage, BinaryError> {
      .failure(.unreadable(path: path, reason: why))
    }
    // O_NONBLOCK: a FIFO named *.so must not block the host; regular files ignore it.
    let fd = openat(directory, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
    guard fd >= 0 else { return failure(String(cString: strerror(errno))) }
    var keep = false
    defer { if !keep { close(fd) } }
    var st = stat()
    guard fstat(fd, &st) == 0 else { return failure(String(cString: strerror(errno))) }
    guard (st.st_mode & S_IFMT) == S_IFREG else { return failure("not a regular file") }
    let size = Int(st.st_size)
    if size == 0 { return .success(FileImage(storage: .memory(nil, count: 0))) }
    if size > readLimit {
      keep = true
      return .success(FileImage(storage: .descriptor(fd, size: size)))
    }
    guard let buffer = malloc(size) else { return failure("out of memory for \(size) bytes") }
    var total = 0
    while total < size {
      let n = read(fd, buffer + total, size - total)
      if n < 0 && errno == EINTR { continue }
      if n <= 0 { break }
      total += n
    }
    // A file that shrank while being read is inspected as what was read: truncated, if so.
    return .success(FileImage(storage: .memory(buffer.assumingMemoryBound(to: CChar.self), count: total)))
  }

  func release() {
    switch storage {
    case .memory(let base, _): free(base)
    case .descriptor(let fd, _): close(fd)
    }
  }
}
