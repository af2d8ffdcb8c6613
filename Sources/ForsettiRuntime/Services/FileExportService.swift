import CForsetti
import CForsettiSys
import ForsettiBridge
import ForsettiCore
import FoundationEssentials
import Glibc
import Synchronization

/// forsetti/services/file_export.h on the host's side, as upstream's `LocalFileExportService`:
/// a module names a file, the host keeps its last path component and writes it in the module's
/// own subdirectory of the operator's export directory, `EXPORT/<moduleID>/`. Every open is
/// relative to a descriptor of that subdirectory (itself opened without following a link), of
/// one component that is neither `.` nor `..`, and never follows a symbolic link: a link planted
/// under the name is replaced (atomic write) or refused (append), its target left untouched. So
/// no name reaches another module's files. What a module's files take is bounded by `quota`.
final class FileExportService: Sendable {
  /// The operator's export directory (`--export-dir`); nil when none was given.
  let directory: String?
  let warn: @Sendable (String, String) -> Void
  /// The bytes of each module's files in its subdirectory (`--export-quota`).
  let quota: QuotaLedger
  /// Modules already told there is no export directory: one line each, not one a call.
  private let warnedUnavailable = Mutex<Set<String>>([])

  /// Mode of every exported file: the operator's group may read what modules hand out.
  static let fileMode: mode_t = 0o640
  /// Mode of a module's subdirectory the host makes, as `--export-dir`'s own.
  static let directoryMode: mode_t = 0o750

  init(directory: String?, quotaBytes: Int, warn: @escaping @Sendable (String, String) -> Void) {
    let directory = directory.map(Self.normalised)
    self.directory = directory
    self.warn = warn
    quota = QuotaLedger(Quota(service: "file export", bytes: quotaBytes, option: "export-quota")) {
      moduleID in
      directory.map { QuotaLedger.bytes(in: Self.join($0, moduleID)) } ?? 0
    }
  }

  /// `name` beneath `directory`, as text.
  static func join(_ directory: String, _ name: String) -> String {
    directory == "/" ? "/" + name : directory + "/" + name
  }

  /// Why a write was refused or failed, with the offending value.
  enum Failure: Error, Equatable, CustomStringConvertible {
    case refusedName(String)
    /// The name holds what `ExportNameRule` refuses; `shown` is the name escaped.
    case refusedCharacters(shown: String, ExportNameRule.Refusal)
    case notADirectory(String)
    case quota(Quota, moduleID: String)
    case unknownFlags(UInt32)
    case tooLarge(Int)
    case notRegularFile(name: String)
    case system(step: String, name: String, errno: Int32)

    var status: Int32 {
      switch self {
      case .refusedName, .refusedCharacters, .unknownFlags: FORSETTI_ERR_INVALID_ARGUMENT
      case .tooLarge: FORSETTI_ERR_TOO_LARGE
      case .notRegularFile, .notADirectory: FORSETTI_ERR_DENIED
      case .quota: FORSETTI_ERR_QUOTA
      case .system: FORSETTI_ERR_IO
      }
    }

    var description: String {
      switch self {
      case .refusedName(let n): "file export: refused the name \"\(LogRecord.streamSafe(n))\""
      case .refusedCharacters(let shown, let why):
        "file export: refused the name \"\(shown)\": \(why); nothing was written. Export names may hold no control characters, line or paragraph separators, bidirectional controls or bytes that are not UTF-8"
      case .notADirectory(let path):
        "file export: \(path) is a symbolic link or not a directory; remove it so that the host can make the module's export directory"
      case .quota(let q, let moduleID): q.reached(by: moduleID)
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
      // The ID names a directory: one component, never `.` or `..` (the manifest's rule already).
      guard SandboxStorage.isValidKey(caller.moduleID) else { throw .refusedName(caller.moduleID) }
    } catch {
      if case .refusedCharacters = error { warn(caller.moduleID, error.description) }
      return .status(error.status)
    }
    let data = r.argument(1) ?? []
    guard data.count <= Int(FORSETTI_FILE_EXPORT_MAX_DATA) else { return .status(FORSETTI_ERR_TOO_LARGE) }
    let path = Self.join(Self.join(directory, caller.moduleID), name)
    let reply = Array(path.utf8) + [0]
    // Nothing is written when the module could not learn where it went.
    if wantsPath, reply.count > r.capacity {
      return ServiceReply(FORSETTI_ERR_BUFFER_TOO_SMALL, length: reply.count)
    }
    let append = flags & UInt32(FORSETTI_FILE_EXPORT_APPEND) != 0
    let (failure, tell): (Failure?, Bool) = quota.withMeter(caller.moduleID) { meter in
      do throws(Failure) {
        try Self.write(
          data, name: name, in: directory, moduleID: caller.moduleID, append: append, meter: &meter)
        return (nil, false)
      } catch {
        // A module hammering at its quota is told of once, not once a call.
        if case .quota = error { return (error, meter.tellRefusal()) }
        return (error, true)
      }
    }
    if let failure {
      if tell { warn(caller.moduleID, failure.description) }
      return .status(failure.status)
    }
    return wantsPath ? ServiceReply(FORSETTI_OK, reply) : .status(FORSETTI_OK)
  }

  /// The name a module's `file_name` stands for: its last path component, as upstream
  /// (`URL(fileURLWithPath:).lastPathComponent`: trailing slashes do not count).
  static func fileName(_ raw: [UInt8]) throws(Failure) -> String {
    // A NUL too (a C name ends at its NUL; one inside could only come in a forged frame).
    if let why = ExportNameRule.refusal(raw) {
      throw .refusedCharacters(shown: ExportNameRule.shown(raw), why)
    }
    guard let text = String(validating: raw, as: UTF8.self) else { throw .refusedName("<not UTF-8>") }
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

  /// Writes `data` as `name` in `moduleID`'s subdirectory of `directory` (made, mode 0750, when
  /// missing): a temporary file renamed over the name (the rename replaces a symbolic link rather
  /// than following it), or an append to a regular file opened without following links. The
  /// write happens only when `meter` admits the file's new size.
  static func write(
    _ data: [UInt8], name: String, in directory: String, moduleID: String, append: Bool, meter: inout Meter
  ) throws(Failure) {
    let top = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard top >= 0 else { throw .system(step: "open the export directory for", name: name, errno: errno) }
    defer { close(top) }
    let dir = try moduleDirectory(moduleID, in: top, path: join(directory, moduleID))
    defer { close(dir) }
    recoverHeld(name, in: dir)
    var before = stat()
    let existed = fstatat(dir, name, &before, AT_SYMLINK_NOFOLLOW) == 0 && before.st_mode & S_IFMT == S_IFREG
    let old = existed ? Int(before.st_size) : nil
    let new = append ? Meter.add(old ?? 0, data.count) : data.count
    // Refused before anything is opened: an append at the quota creates no empty file.
    guard meter.admits(old: old, new: new) else { throw .quota(meter.quota, moduleID: moduleID) }
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
      guard st.st_mode & S_IFMT == S_IFREG, st.st_nlink == 1 else { throw .notRegularFile(name: name) }
      // A hard link would write to a file named elsewhere too, and a count read by name can lie:
      // while a link is being unlinked its count has dropped and its name still resolves (the
      // kernel unhashes the name after), so a link to a file outside passed as a file of one
      // link (seen under load: the outside file appended to). The file is taken under a private
      // name first (the rename and any unlink of the name are serialized by the directory's
      // lock): if that name then holds the descriptor's file with one link, no other name of it
      // exists, and it is put back under its name after the write.
      let held = heldName(name)
      guard forsetti_rename_noreplace(dir, name, dir, held) == 0 else { throw .notRegularFile(name: name) }
      var named = stat()
      guard fstatat(dir, held, &named, AT_SYMLINK_NOFOLLOW) == 0, named.st_dev == st.st_dev,
        named.st_ino == st.st_ino, named.st_nlink == 1
      else {
        // Not ours alone: back under its name, unless something took the name meanwhile.
        if forsetti_rename_noreplace(dir, held, dir, name) != 0 { unlinkat(dir, held, 0) }
        throw .notRegularFile(name: name)
      }
      // Back under its name unless something took the name meanwhile (an operator's file is not
      // replaced): then it stays held, and the next write of the name finds it there.
      defer { forsetti_rename_noreplace(dir, held, dir, name) }
      let written = FileDescriptor.writeAll(fd, data)
      let e = errno
      // What the file holds now, whatever part of the write landed.
      var after = stat()
      meter.record(old: old, new: fstat(fd, &after) == 0 ? Int(after.st_size) : new)
      guard written else { throw .system(step: "append to", name: name, errno: e) }
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
    meter.record(old: old, new: new)
    fsync(dir)
  }

  /// The private name an appended file is held under while it is written:
  /// `.forsetti-append-NAMEHASH-PID-RANDOM`. The name itself may be as long as a file name can
  /// be, so its hash stands for it; the pid says whether a holder may still be at work.
  static func heldName(_ name: String) -> String {
    "\(heldPrefix(name))\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
  }

  static func heldPrefix(_ name: String) -> String {
    // FNV-1a: stable across runs, unlike `Hasher`; a collision only mixes up one module's own
    // files in its own directory.
    var h: UInt64 = 0xcbf2_9ce4_8422_2325
    for b in name.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
    return ".forsetti-append-\(String(h, radix: 16))-"
  }

  /// Puts back under `name` a file a host that died mid-append left held (`heldName`), when the
  /// name is free: its content would otherwise be out of sight, and the next append would start
  /// a new file. Only this process's pid or a pid no longer running is a leftover: the caller
  /// holds the module's quota lock, so no append of this process is under way.
  static func recoverHeld(_ name: String, in dir: Int32) {
    var st = stat()
    guard fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0, errno == ENOENT else { return }
    let prefix = heldPrefix(name)
    let listing = dup(dir)
    guard listing >= 0, let d = fdopendir(listing) else {
      if listing >= 0 { close(listing) }
      return
    }
    defer { closedir(d) }
    while let e = readdir(d) {
      let entry = withUnsafeBytes(of: e.pointee.d_name) { raw in
        String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
      }
      guard entry.hasPrefix(prefix),
        let pid = entry.dropFirst(prefix.count).split(separator: "-").first.flatMap({ Int32($0) }),
        pid == getpid() || (kill(pid, 0) != 0 && errno == ESRCH)
      else { continue }
      if forsetti_rename_noreplace(dir, entry, dir, name) == 0 { return }
    }
  }

  /// A descriptor of `moduleID`'s subdirectory of `top`, made (mode 0750) when missing; never
  /// a symbolic link followed. `path` is for the message.
  static func moduleDirectory(_ moduleID: String, in top: Int32, path: String) throws(Failure) -> Int32 {
    let made = mkdirat(top, moduleID, directoryMode) == 0
    guard made || errno == EEXIST else {
      throw .system(step: "make the module's export directory for", name: moduleID, errno: errno)
    }
    let dir = openat(top, moduleID, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
    guard dir >= 0 else {
      let e = errno
      if e == ELOOP || e == ENOTDIR { throw .notADirectory(path) }
      throw .system(step: "open the module's export directory for", name: moduleID, errno: e)
    }
    // The umask may have taken bits away from a directory made here; one the operator changed is theirs.
    if made { _ = fchmod(dir, directoryMode) }
    return dir
  }
}
