import CForsetti
import ForsettiBridge
import ForsettiCore
import FoundationEssentials
import Glibc
import Synchronization

/// forsetti/services/file_export.h on the host's side, as upstream's `LocalFileExportService`:
/// a module names a file, the host keeps its last path component and writes it beneath the
/// operator's export directory. Every open is relative to a descriptor of that directory, of
/// one component that is neither `.` nor `..`, and never follows a symbolic link: a link planted
/// under the name is replaced (atomic write) or refused (append), its target left untouched.
final class FileExportService: Sendable {
  /// The operator's export directory (`--export-dir`); nil when none was given.
  let directory: String?
  let warn: @Sendable (String, String) -> Void
  /// Modules already told there is no export directory: one line each, not one a call.
  private let warnedUnavailable = Mutex<Set<String>>([])

  /// Mode of every exported file: the operator's group may read what modules hand out.
  static let fileMode: mode_t = 0o640

  init(directory: String?, warn: @escaping @Sendable (String, String) -> Void) {
    self.directory = directory.map(Self.normalised)
    self.warn = warn
  }

  /// Why a write was refused or failed, with the offending value.
  enum Failure: Error, Equatable, CustomStringConvertible {
    case refusedName(String)
    case unknownFlags(UInt32)
    case tooLarge(Int)
    case notRegularFile(name: String)
    case system(step: String, name: String, errno: Int32)

    var status: Int32 {
      switch self {
      case .refusedName, .unknownFlags: FORSETTI_ERR_INVALID_ARGUMENT
      case .tooLarge: FORSETTI_ERR_TOO_LARGE
      case .notRegularFile: FORSETTI_ERR_DENIED
      case .system: FORSETTI_ERR_IO
      }
    }

    var description: String {
      switch self {
      case .refusedName(let n): "file export: refused the name \"\(LogRecord.streamSafe(n))\""
      case .unknownFlags(let f): "file export: unknown flags 0x\(String(f, radix: 16))"
      case .tooLarge(let n): "file export: \(n) bytes is more than one write takes"
      case .notRegularFile(let n):
        "file export: refused to append to \"\(n)\": it is a symbolic link, a link to another file or not a regular file"
      case .system(let step, let n, let e):
        "file export: \(step) \"\(n)\" failed: \(String(cString: strerror(e)))"
      }
    }
  }

  func answer(_ r: ServiceRequest, from caller: ModuleCaller) -> ServiceReply {
    guard r.operation == .exportWrite else { return .status(FORSETTI_ERR_INVALID_ARGUMENT) }
    guard let directory else {
      let first = warnedUnavailable.withLock { $0.insert(caller.moduleID).inserted }
      if first {
        warn(
          caller.moduleID,
          "file export: the host has no export directory (start it with --export-dir DIR); every write of this module fails with FORSETTI_ERR_UNAVAILABLE"
        )
      }
      return .status(FORSETTI_ERR_UNAVAILABLE)
    }
    let flags = UInt32(truncatingIfNeeded: r.number)
    let wantsPath = r.number & HostFunctions.exportWantsPath != 0
    let name: String
    do throws(Failure) {
      // Bits above the C flags and the path bit can only come in a forged frame.
      guard flags & ~UInt32(FORSETTI_FILE_EXPORT_APPEND) == 0,
        r.number & ~(Int64(UInt32.max) | HostFunctions.exportWantsPath) == 0
      else { throw .unknownFlags(flags) }
      name = try Self.fileName(r.argument(0) ?? [])
    } catch {
      return .status(error.status)
    }
    let data = r.argument(1) ?? []
    guard data.count <= Int(FORSETTI_FILE_EXPORT_MAX_DATA) else { return .status(FORSETTI_ERR_TOO_LARGE) }
    let path = directory == "/" ? "/" + name : directory + "/" + name
    let reply = Array(path.utf8) + [0]
    // Nothing is written when the module could not learn where it went.
    if wantsPath, reply.count > r.capacity {
      return ServiceReply(FORSETTI_ERR_BUFFER_TOO_SMALL, length: reply.count)
    }
    do throws(Failure) {
      try Self.write(
        data, name: name, in: directory, append: flags & UInt32(FORSETTI_FILE_EXPORT_APPEND) != 0)
    } catch {
      warn(caller.moduleID, error.description)
      return .status(error.status)
    }
    return wantsPath ? ServiceReply(FORSETTI_OK, reply) : .status(FORSETTI_OK)
  }

  /// The name a module's `file_name` stands for: its last path component, as upstream
  /// (`URL(fileURLWithPath:).lastPathComponent`: trailing slashes do not count).
  static func fileName(_ raw: [UInt8]) throws(Failure) -> String {
    guard let text = String(validating: raw, as: UTF8.self) else { throw .refusedName("<not UTF-8>") }
    // A C name ends at its NUL; one inside could only come in a forged frame.
    guard !raw.contains(0) else { throw .refusedName(text.replacing("\0", with: "\\0")) }
    let last = text.split(separator: "/", omittingEmptySubsequences: true).last.map(String.init) ?? ""
    guard !last.isEmpty, last != ".", last != "..", last.utf8.count <= Int(FORSETTI_FILE_EXPORT_MAX_NAME)
    else { throw .refusedName(text) }
    return last
  }

  /// `path` absolute, without `.`, `..` or repeated slashes (it is joined with names as text).
  static func normalised(_ path: String) -> String {
    let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    var parts: [Substring] = []
    for c in absolute.split(separator: "/") where c != "." {
      if c == ".." { _ = parts.popLast() } else { parts.append(c) }
    }
    return "/" + parts.joined(separator: "/")
  }

  /// Writes `data` as `name` in `directory`: a temporary file renamed over the name (the
  /// rename replaces a symbolic link rather than following it), or an append to a regular file
  /// opened without following links.
  static func write(_ data: [UInt8], name: String, in directory: String, append: Bool) throws(Failure) {
    let dir = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard dir >= 0 else { throw .system(step: "open the export directory for", name: name, errno: errno) }
    defer { close(dir) }
    if append {
      // O_NONBLOCK: a FIFO planted under the name fails instead of blocking the host.
      let fd = openat(
        dir, name, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, fileMode)
      guard fd >= 0 else {
        let e = errno
        if e == ELOOP || e == ENXIO { throw .notRegularFile(name: name) }
        throw .system(step: "open", name: name, errno: e)
      }
      defer { close(fd) }
      var st = stat()
      guard fstat(fd, &st) == 0 else { throw .system(step: "stat", name: name, errno: errno) }
      // A file this append created: the mode is the service's promise, whatever the umask took.
      if st.st_size == 0 { _ = fchmod(fd, fileMode) }
      // A hard link would write to a file named elsewhere too. Checked again by name after the
      // descriptor's own count: a link made under the name and removed between the open and the
      // fstat leaves a file with one link, named only outside.
      guard st.st_mode & S_IFMT == S_IFREG, st.st_nlink == 1 else { throw .notRegularFile(name: name) }
      var named = stat()
      guard fstatat(dir, name, &named, AT_SYMLINK_NOFOLLOW) == 0, named.st_dev == st.st_dev,
        named.st_ino == st.st_ino, named.st_nlink == 1
      else { throw .notRegularFile(name: name) }
      guard FileDescriptor.writeAll(fd, data) else {
        throw .system(step: "append to", name: name, errno: errno)
      }
      return
    }
    let tmp = ".forsetti-export-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
    let fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, fileMode)
    guard fd >= 0 else { throw .system(step: "create a temporary file for", name: name, errno: errno) }
    // The umask may have taken bits away; the mode is the service's promise.
    let ok = fchmod(fd, fileMode) == 0 && FileDescriptor.writeAll(fd, data) && fsync(fd) == 0
    let e = errno
    close(fd)
    guard ok else {
      unlinkat(dir, tmp, 0)
      throw .system(step: "write", name: name, errno: e)
    }
    guard renameat(dir, tmp, dir, name) == 0 else {
      let e = errno
      unlinkat(dir, tmp, 0)
      throw .system(step: "rename into place", name: name, errno: e)
    }
    fsync(dir)
  }
}
