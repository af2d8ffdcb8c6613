import CForsettiSys
import ForsettiBridge
import Glibc
import Synchronization

/// The state directory a host owns, held by identity rather than by path: the directory its
/// `--state` path named at start, kept open. `mv S S.old; mkdir S` under a running host leaves
/// it holding `S.old`; a second host on `S` then owns the new directory, and the first must not
/// lock, write or unlink anything at `S` (it would take over the second's `runtime.json` and
/// remove its control socket). So the host's own files are reached through the open directory
/// (`within`), and the host notices the path no longer naming it (`check`, and inotify on the
/// directory and on its parent) and stops (`RunCommand`).
package final class StateDirectoryHold: Sendable {
  /// The path given at start (`--state`), as the host names it in messages.
  package let path: String
  /// The directory, open for the host's life (O_CLOEXEC: no worker inherits it).
  package let fd: Int32
  private let device: UInt64
  private let inode: UInt64
  /// Whether `/proc/self/fd/N` leads to the directory (it does wherever /proc is mounted).
  private let throughProc: Bool
  /// What was noticed, once: the hold never goes back to trusting the path.
  private let noticed = Mutex<Replacement?>(nil)
  private let onReplacement = Mutex<(@Sendable (Replacement) -> Void)?>(nil)
  /// The inotify descriptor and the pipe `stop` writes to (-1 when inotify is unavailable:
  /// the checks at each write and at stop remain).
  private let watchFD: Int32
  /// Per watch descriptor on a directory of the path, the entry of it the path goes through:
  /// an event on that entry (a link swapped, a directory renamed over it) makes the hold look.
  private let entries: [Int32: String]
  private let stopRead: Int32
  private let stopWrite: Int32
  private let stopped = Atomic<Bool>(false)

  /// How the path stopped naming the held directory.
  package enum Replacement: Sendable, Equatable {
    /// Nothing is at the path: the directory was moved away or removed.
    case gone
    /// Something else is at the path: another directory (or a file, or a symbolic link to one).
    case replaced
  }

  /// Why the directory could not be held.
  package enum HoldError: Error, Sendable, Equatable, CustomStringConvertible {
    case open(path: String, errno: Int32)

    package var description: String {
      switch self {
      case .open(let p, let e): "\(p): cannot open the state directory: \(String(cString: strerror(e)))"
      }
    }
  }

  /// Opens `path` (following a symbolic link, as every other use of it did) and starts watching
  /// for it to be moved away or replaced.
  package convenience init(path: String) throws(HoldError) {
    let dir = path.isEmpty ? "." : path
    let fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard fd >= 0 else { throw .open(path: dir, errno: errno) }
    try self.init(holding: fd, path: dir)
  }

  /// The directory an image of this process held before an upgrade (`Handover`), by its open
  /// descriptor: the same directory, whatever is at the path now (`check` then says so).
  package convenience init(adopting fd: Int32, path: String) throws(HoldError) {
    _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    try self.init(holding: fd, path: path.isEmpty ? "." : path)
  }

  private init(holding fd: Int32, path dir: String) throws(HoldError) {
    var st = stat()
    guard fstat(fd, &st) == 0 else {
      let e = errno
      close(fd)
      throw .open(path: dir, errno: e)
    }
    self.path = dir
    self.fd = fd
    device = UInt64(st.st_dev)
    inode = UInt64(st.st_ino)
    var proc = stat()
    throughProc =
      stat("/proc/self/fd/\(fd)", &proc) == 0 && UInt64(proc.st_dev) == device && UInt64(proc.st_ino) == inode
    (watchFD, entries, stopRead, stopWrite) = Self.watch(
      held: throughProc ? "/proc/self/fd/\(fd)" : dir, path: Self.absolute(dir))
    if watchFD >= 0 { _ = DetachedThread.start { [self] in self.readLoop() } }
  }

  // The reading thread holds the hold until it ends, so this runs after it. The pipe's read end
  // stays open until here: `stop` after the thread ended by itself must not raise SIGPIPE.
  deinit {
    close(fd)
    for f in [watchFD, stopRead, stopWrite] where f >= 0 { close(f) }
  }

  /// A path to `name` inside the held directory, whatever the directory is called now
  /// (`/proc/self/fd/N/name`): a file opened, written or renamed through it lands in this
  /// directory, never in one put at `path` later. Without /proc, `path/name` (then only the
  /// checks guard it).
  package func within(_ name: String) -> String {
    throughProc ? "/proc/self/fd/\(fd)/\(name)" : PathText.join(path, name)
  }

  /// What was noticed so far, without looking again.
  package var replacement: Replacement? { noticed.withLock { $0 } }

  /// Looks at `path` again: nil while it still names the held directory. The first time it does
  /// not, the hold remembers it for good and calls the `whenReplaced` handler.
  @discardableResult
  package func check() -> Replacement? {
    if let r = replacement { return r }
    var st = stat()
    let found: Replacement?
    if stat(path, &st) == 0 {
      found = UInt64(st.st_dev) == device && UInt64(st.st_ino) == inode ? nil : .replaced
    } else {
      // Only a missing path counts: a path made unreadable (EACCES) or too deep for a moment
      // says nothing about which directory it names.
      found = errno == ENOENT || errno == ENOTDIR ? .gone : nil
    }
    guard let found else { return nil }
    let first = noticed.withLock { n in
      guard n == nil else { return false }
      n = found
      return true
    }
    if first, let handler = onReplacement.withLock({ $0 }) { handler(found) }
    return found
  }

  /// Calls `handler` (on any thread) once the path is noticed no longer naming the directory;
  /// at once if it was already.
  package func whenReplaced(_ handler: @escaping @Sendable (Replacement) -> Void) {
    onReplacement.withLock { $0 = handler }
    if let r = replacement { handler(r) }
  }

  /// The host's line for `r`: the path, what happened, and where the held directory is now.
  package func describe(_ r: Replacement) -> String {
    let what =
      switch r {
      case .gone: "was moved away or removed"
      case .replaced: "was replaced: another directory is at that path now"
      }
    let now = currentLocation.map { " (the directory this host holds is now \($0))" } ?? ""
    return "state directory \(path) \(what)\(now)"
  }

  /// Where the held directory is now, as the kernel names it (`… (deleted)` once removed).
  package var currentLocation: String? {
    guard throughProc else { return nil }
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let n = readlink("/proc/self/fd/\(fd)", &buffer, buffer.count - 1)
    guard n > 0 else { return nil }
    return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  /// Stops watching (the checks still answer).
  package func stop() {
    guard stopWrite >= 0, !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
    var one: UInt8 = 1
    _ = write(stopWrite, &one, 1)
  }

  /// `dir` as an absolute path, spelled as given (links not resolved): the directories it goes
  /// through are the ones whose entries decide what it names.
  private static func absolute(_ dir: String) -> String {
    if dir.hasPrefix("/") { return dir }
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    guard getcwd(&buffer, buffer.count) != nil else { return dir }
    let cwd = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return PathText.join(cwd, dir)
  }

  /// An inotify descriptor watching the held directory itself for being moved or removed, and
  /// every directory the absolute path goes through for the one entry of it the path takes
  /// (`/var`'s `lib`, `lib`'s `forsetti`, …): a directory renamed over one of them, or a symbolic
  /// link on the way swapped (`ln -s r2 cur.tmp && mv -T cur.tmp cur`), changes what the path
  /// names, and the hold looks again at once. A link's target is reached by the path's own
  /// lookups, not watched by name: the periodic look (`readLoop`) covers it.
  private static func watch(held: String, path: String) -> (Int32, [Int32: String], Int32, Int32) {
    let fd = inotify_init1(Int32(IN_CLOEXEC))
    guard fd >= 0 else { return (-1, [:], -1, -1) }
    var pipe: [Int32] = [0, 0]
    guard forsetti_pipe_cloexec(&pipe) == 0 else {
      close(fd)
      return (-1, [:], -1, -1)
    }
    let selfEvents = UInt32(IN_MOVE_SELF | IN_DELETE_SELF | IN_ONLYDIR)
    let entryEvents = UInt32(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)
    guard inotify_add_watch(fd, held, selfEvents) >= 0 else {
      for f in [fd, pipe[0], pipe[1]] { close(f) }
      return (-1, [:], -1, -1)
    }
    var entries: [Int32: String] = [:]
    var dir = "/"
    for part in path.split(separator: "/", omittingEmptySubsequences: true).map(String.init) {
      // Not fatal: a directory the host may not read still leaves the other watches.
      let wd = inotify_add_watch(fd, dir, selfEvents | entryEvents)
      if wd >= 0 { entries[wd] = part }
      dir = PathText.join(dir, part)
    }
    return (fd, entries, pipe[0], pipe[1])
  }

  /// How often the hold looks at its path without an event: what no watch sees (a link's
  /// target swapped) is noticed within this.
  static let lookEvery: Int32 = 1000

  /// Looks at the path again at every event on the held directory or on an entry the path goes
  /// through (the events say something moved, not what is at the path now), and every
  /// `lookEvery` ms, until the replacement is noticed or `stop`.
  private func readLoop() {
    let size = 16 * 1024
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 8)
    defer { buffer.deallocate() }
    var fds = [
      pollfd(fd: watchFD, events: Int16(POLLIN), revents: 0),
      pollfd(fd: stopRead, events: Int16(POLLIN), revents: 0),
    ]
    while true {
      let ready = poll(&fds, 2, Self.lookEvery)
      if ready < 0 && errno == EINTR { continue }
      guard ready >= 0, fds[1].revents == 0 else { return }
      if ready == 0 {
        if check() != nil { return }
        continue
      }
      let n = read(watchFD, buffer, size)
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { return }
      if concerns(UnsafeRawBufferPointer(start: buffer, count: n)), check() != nil { return }
    }
  }

  /// Whether any event in `events` is about the held directory itself or about the entry the
  /// path takes in a directory on the way (not another file created in `/tmp`, say).
  private func concerns(_ events: UnsafeRawBufferPointer) -> Bool {
    let header = MemoryLayout<inotify_event>.size
    var at = 0
    while at + header <= events.count {
      let wd = events.loadUnaligned(fromByteOffset: at, as: Int32.self)
      let mask = events.loadUnaligned(fromByteOffset: at + 4, as: UInt32.self)
      let length = Int(events.loadUnaligned(fromByteOffset: at + 12, as: UInt32.self))
      guard at + header + length <= events.count else { return true }
      let name = events[(at + header)..<(at + header + length)].prefix { $0 != 0 }
      at += header + length
      if mask & UInt32(IN_Q_OVERFLOW) != 0 { return true }
      guard let wanted = entries[wd] else { return true }
      if mask & UInt32(IN_MOVE_SELF | IN_DELETE_SELF) != 0 || name.elementsEqual(wanted.utf8) { return true }
    }
    return false
  }
}
