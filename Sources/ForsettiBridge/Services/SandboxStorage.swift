import CForsetti
import CForsettiSys
import Glibc

/// One module's storage: key-value pairs and files, all beneath `sandboxes/<moduleID>/`.
///
/// Every path a module passes is resolved by the kernel with openat2 `RESOLVE_BENEATH` against
/// a descriptor of the sandbox, so `..`, absolute paths and symbolic links that lead out are
/// refused by the kernel itself, with no race between a check and the open.
public final class SandboxStorage: Sendable {
  public let root: String
  private let rootFD: Int32
  private let kvFD: Int32

  /// Key-value pairs live in this directory of the sandbox, one file per key.
  package static let kvDirectory = ".kv"
  package static let resolve = UInt64(FORSETTI_RESOLVE_BENEATH | FORSETTI_RESOLVE_NO_MAGICLINKS)

  public enum OpenError: Error, Sendable, CustomStringConvertible {
    case cannotCreate(path: String, errno: Int32)

    public var description: String {
      switch self {
      case .cannotCreate(let p, let e): "cannot prepare sandbox \(p): \(String(cString: strerror(e)))"
      }
    }
  }

  /// Creates the sandbox directory if needed and opens it.
  public init(root: String) throws(OpenError) {
    try Self.makeDirectories(root + "/" + Self.kvDirectory)
    let fd = open(root, FORSETTI_O_PATH | O_DIRECTORY | O_CLOEXEC)
    guard fd >= 0 else { throw .cannotCreate(path: root, errno: errno) }
    let kv = openat(fd, Self.kvDirectory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
    guard kv >= 0 else {
      let e = errno
      close(fd)
      throw .cannotCreate(path: root, errno: e)
    }
    self.root = root
    rootFD = fd
    kvFD = kv
  }

  deinit {
    close(rootFD)
    close(kvFD)
  }

  /// mkdir -p by hand, so a failure reports its real errno (ENOSPC, ENOTDIR, ENAMETOOLONG …).
  /// The deepest directory is tried first: usually it exists, or only it and its parent are
  /// missing, so the ancestors are not each asked again on every module start.
  static func makeDirectories(_ path: String) throws(OpenError) {
    if mkdir(path, 0o700) == 0 || errno == EEXIST { return }
    guard errno == ENOENT else { throw .cannotCreate(path: path, errno: errno) }
    let (parent, _) = splitLast(path)
    guard !parent.isEmpty, parent != "/", parent != path else {
      throw .cannotCreate(path: path, errno: ENOENT)
    }
    try makeDirectories(parent)
    if mkdir(path, 0o700) != 0 && errno != EEXIST { throw .cannotCreate(path: path, errno: errno) }
  }

  /// Keys are 1–128 bytes of [A-Za-z0-9._-], not starting with a dot: always one plain file name.
  package static func isValidKey(_ key: String) -> Bool {
    guard !key.isEmpty, key.utf8.count <= Int(FORSETTI_STORAGE_MAX_KEY), !key.hasPrefix(".") else {
      return false
    }
    return key.utf8.allSatisfy { b in
      (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2E
        || b == 0x5F
        || b == 0x2D
    }
  }

  public func set(_ key: String, _ bytes: UnsafeRawBufferPointer) -> Int32 {
    guard Self.isValidKey(key) else { return FORSETTI_ERR_INVALID_ARGUMENT }
    guard bytes.count <= Int(FORSETTI_STORAGE_MAX_VALUE) else { return FORSETTI_ERR_TOO_LARGE }
    let tmp = ".tmp-\(key)-\(UInt32.random(in: 0...UInt32.max))"
    let fd = openat(kvFD, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return FORSETTI_ERR_IO }
    var failed: Int32 = 0
    var offset = 0
    while offset < bytes.count {
      let n = Glibc.write(fd, bytes.baseAddress.map { $0 + offset }, bytes.count - offset)
      if n < 0 {
        if errno == EINTR { continue }
        failed = errno
        break
      }
      offset += n
    }
    if failed == 0 && fsync(fd) != 0 { failed = errno }
    close(fd)
    if failed == 0 && renameat(kvFD, tmp, kvFD, key) != 0 { failed = errno }
    guard failed == 0 else {
      unlinkat(kvFD, tmp, 0)
      return Self.writeStatus(for: failed)
    }
    fsync(kvFD)
    return FORSETTI_OK
  }

  /// Copies the value into `buffer`; `length` receives its size (also when too small).
  public func get(_ key: String, into buffer: UnsafeMutableRawBufferPointer, length: inout Int) -> Int32 {
    guard Self.isValidKey(key) else { return FORSETTI_ERR_INVALID_ARGUMENT }
    let fd = openat(kvFD, key, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
    guard fd >= 0 else { return errno == ENOENT ? FORSETTI_ERR_NOT_FOUND : FORSETTI_ERR_IO }
    defer { close(fd) }
    var st = stat()
    guard fstat(fd, &st) == 0 else { return FORSETTI_ERR_IO }
    let size = Int(st.st_size)
    length = size
    guard size <= buffer.count else { return FORSETTI_ERR_BUFFER_TOO_SMALL }
    var offset = 0
    while offset < size {
      let n = pread(fd, buffer.baseAddress.map { $0 + offset }, size - offset, off_t(offset))
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { return FORSETTI_ERR_IO }
      offset += n
    }
    return FORSETTI_OK
  }

  public func remove(_ key: String) -> Int32 {
    guard Self.isValidKey(key) else { return FORSETTI_ERR_INVALID_ARGUMENT }
    guard unlinkat(kvFD, key, 0) == 0 else {
      return errno == ENOENT ? FORSETTI_ERR_NOT_FOUND : FORSETTI_ERR_IO
    }
    return FORSETTI_OK
  }

  /// Opens a file beneath the sandbox; returns a descriptor the caller owns, or a status.
  public func openFile(_ path: String, flags: UInt32) -> Int32 {
    guard !path.isEmpty else { return FORSETTI_ERR_INVALID_ARGUMENT }
    let known =
      FORSETTI_OPEN_READ | FORSETTI_OPEN_WRITE | FORSETTI_OPEN_CREATE | FORSETTI_OPEN_TRUNCATE
      | FORSETTI_OPEN_APPEND
    let read = flags & FORSETTI_OPEN_READ != 0
    let write = flags & (FORSETTI_OPEN_WRITE | FORSETTI_OPEN_APPEND) != 0
    // Unknown bits, or truncation without write access (which Linux would still perform), are
    // refused rather than guessed at.
    guard flags & ~known == 0, read || write,
      write || flags & (FORSETTI_OPEN_TRUNCATE | FORSETTI_OPEN_CREATE) == 0
    else {
      return FORSETTI_ERR_INVALID_ARGUMENT
    }
    var oflags: Int32 = read && write ? O_RDWR : (write ? O_WRONLY : O_RDONLY)
    if flags & FORSETTI_OPEN_CREATE != 0 { oflags |= O_CREAT }
    if flags & FORSETTI_OPEN_TRUNCATE != 0 { oflags |= O_TRUNC }
    if flags & FORSETTI_OPEN_APPEND != 0 { oflags |= O_APPEND }
    // openat2 rejects a mode without O_CREAT (EINVAL), unlike openat.
    let mode: UInt64 = oflags & O_CREAT != 0 ? 0o600 : 0
    let fd = forsetti_openat2(
      rootFD, path, UInt64(UInt32(bitPattern: oflags | O_CLOEXEC)), mode, Self.resolve)
    if fd >= 0 { return fd }
    return Self.status(for: errno)
  }

  public func makeDirectory(_ path: String) -> Int32 {
    guard !path.isEmpty else { return FORSETTI_ERR_INVALID_ARGUMENT }
    let (parent, name) = Self.splitLast(path)
    guard !name.isEmpty, name != "..", name != "." else { return FORSETTI_ERR_DENIED }
    let pfd =
      parent.isEmpty
      ? fcntl(rootFD, F_DUPFD_CLOEXEC, 0)
      : forsetti_openat2(rootFD, parent, UInt64(FORSETTI_O_PATH | O_DIRECTORY | O_CLOEXEC), 0, Self.resolve)
    guard pfd >= 0 else { return Self.status(for: errno) }
    defer { close(pfd) }
    if mkdirat(pfd, name, 0o700) == 0 { return FORSETTI_OK }
    if errno == EEXIST {
      // Only an existing directory counts as done; a file or symlink of that name does not.
      var st = stat()
      let isDir = fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
      return isDir ? FORSETTI_OK : FORSETTI_ERR_INVALID_ARGUMENT
    }
    return Self.status(for: errno)
  }

  /// A failed write's status: past the sandbox quota's file-size limit (EFBIG, `SandboxQuota`)
  /// or a full disk or quota is FORSETTI_ERR_QUOTA, anything else an I/O error.
  package static func writeStatus(for e: Int32) -> Int32 {
    switch e {
    case EFBIG, ENOSPC, EDQUOT: FORSETTI_ERR_QUOTA
    default: FORSETTI_ERR_IO
    }
  }

  /// EXDEV and ELOOP are how openat2 says "that would leave the sandbox".
  package static func status(for e: Int32) -> Int32 {
    switch e {
    case EXDEV, ELOOP, EACCES, EPERM: FORSETTI_ERR_DENIED
    case ENOENT, ENOTDIR: FORSETTI_ERR_NOT_FOUND
    case EINVAL, ENAMETOOLONG: FORSETTI_ERR_INVALID_ARGUMENT
    default: FORSETTI_ERR_IO
    }
  }
}

extension SandboxStorage {
  /// `a/b/c/` → (`a/b`, `c`); `c` → (``, `c`); `/c` → (`/`, `c`): the parent and last component,
  /// trailing and doubled slashes ignored, as NSString's path methods split them.
  package static func splitLast(_ path: String) -> (parent: String, name: String) {
    var bytes = Array(path.utf8)
    while bytes.count > 1, bytes.last == UInt8(ascii: "/") { bytes.removeLast() }
    guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else {
      return ("", String(decoding: bytes, as: UTF8.self))
    }
    let name = String(decoding: bytes[(slash + 1)...], as: UTF8.self)
    var parent = bytes[..<slash]
    while parent.count > 1, parent.last == UInt8(ascii: "/") { parent.removeLast() }
    if parent.isEmpty { parent = [UInt8(ascii: "/")][...] }
    return (String(decoding: parent, as: UTF8.self), name)
  }
}
