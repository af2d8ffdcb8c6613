import Glibc
import Synchronization

/// When a log file is rotated and how many are kept.
package struct RotationPolicy: Sendable, Hashable {
  /// A file is rotated before a line would take it past this size (a single longer line still
  /// goes whole into a fresh file).
  package var maxFileBytes: Int
  /// Files kept, the one being written included: `log`, `log.1` … `log.<keptFiles - 1>`.
  package var keptFiles: Int

  package init(maxFileBytes: Int, keptFiles: Int) {
    self.maxFileBytes = maxFileBytes
    self.keptFiles = keptFiles
  }

  /// 8 MiB, 5 files.
  package static let standard = LogLimits.standard.rotation
}

/// An append-only log file that rotates by size (`log` → `log.1` → … → `log.N`, the oldest
/// deleted) and is safe to write from any thread: each line is written whole, under one lock,
/// to one file, so no line is ever split across two files or interleaved with another.
///
/// It also survives the file going away: about once a second it checks that `path` still
/// names the file it writes (deleted, or moved by an outside rotation tool) and opens it anew
/// if not. A failed write or open is said once on stderr (``WriteFailureNotice``).
package final class RotatingLogFile: Sendable {
  package let path: String
  package let policy: RotationPolicy
  private let clock: any RateClock
  private let state: Mutex<State>

  private struct State {
    var fd: Int32 = -1
    var size = 0
    var checkedAt: UInt64 = 0
    var notice: WriteFailureNotice
    /// Said once: a rename that failed (the file is then emptied to stay within bounds).
    var rotationTrouble = false
  }

  /// How often the file is checked against `path` and a lost file reopened.
  static let checkEvery: UInt64 = 1_000_000_000

  /// Opens (creating) `path` for appending; nil when it cannot be opened now.
  /// `noticeFD` is where failures are said (standard error; a pipe in tests).
  package init?(
    path: String, policy: RotationPolicy, clock: any RateClock = MonotonicClock(), noticeFD: Int32 = 2
  ) {
    let fd = Self.open(path)
    guard fd >= 0 else { return nil }
    self.path = path
    self.policy = policy
    self.clock = clock
    var st = stat()
    let size = fstat(fd, &st) == 0 ? Int(st.st_size) : 0
    state = Mutex(
      State(
        fd: fd, size: size, checkedAt: clock.nanoseconds(),
        notice: WriteFailureNotice(what: path, fd: noticeFD)))
  }

  deinit {
    state.withLock { s in
      if s.fd >= 0 { close(s.fd) }
    }
  }

  /// Appends `line` (which should end in a newline); false when it was lost.
  @discardableResult
  package func append(_ line: [UInt8]) -> Bool {
    let now = clock.nanoseconds()
    return state.withLock { s in
      // Also the retry of a lost file: at most once a second, not once per line of a flood.
      if now &- s.checkedAt >= Self.checkEvery || now < s.checkedAt {
        s.checkedAt = now
        reconcile(&s)
      }
      guard s.fd >= 0 else {
        s.notice.lostLine()
        return false
      }
      if s.size > 0, s.size > policy.maxFileBytes - min(line.count, policy.maxFileBytes) {
        rotate(&s)
        guard s.fd >= 0 else {
          s.notice.lostLine()
          return false
        }
      }
      guard FileDescriptor.writeAll(s.fd, line) else {
        s.notice.failed("write", errno: errno)
        s.notice.lostLine()
        return false
      }
      s.notice.succeeded()
      s.size = s.size &+ line.count
      return true
    }
  }

  /// The file's size as this writer counts it (for tests).
  package var size: Int { state.withLock { $0.size } }

  private static func open(_ path: String) -> Int32 {
    Glibc.open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
  }

  /// Makes sure `s.fd` is the file `path` names, reopening it (and its directory, which the
  /// host owns) when it was removed or moved away; takes the size from the file itself.
  private func reconcile(_ s: inout State) {
    var mine = stat()
    var named = stat()
    if s.fd >= 0, fstat(s.fd, &mine) == 0 {
      if stat(path, &named) == 0, named.st_dev == mine.st_dev, named.st_ino == mine.st_ino {
        s.size = Int(mine.st_size)
        return
      }
      close(s.fd)
      s.fd = -1
    }
    var fd = Self.open(path)
    if fd < 0, errno == ENOENT {
      let dir = Self.directory(of: path)
      if !dir.isEmpty, mkdir(dir, 0o755) == 0 || errno == EEXIST { fd = Self.open(path) }
    }
    guard fd >= 0 else {
      s.notice.failed("open", errno: errno)
      return
    }
    s.fd = fd
    s.size = fstat(fd, &mine) == 0 ? Int(mine.st_size) : 0
  }

  /// Shifts `path.i` to `path.i+1` (dropping the oldest) and starts an empty `path`.
  private func rotate(_ s: inout State) {
    let kept = max(1, policy.keptFiles)
    guard kept > 1 else {
      empty(&s)
      return
    }
    unlink("\(path).\(kept - 1)")
    for i in stride(from: kept - 2, through: 1, by: -1) {
      rename("\(path).\(i)", "\(path).\(i + 1)")
    }
    guard rename(path, "\(path).1") == 0 else {
      let e = errno
      if !s.rotationTrouble {
        s.rotationTrouble = true
        s.notice.say(
          "cannot rotate \(path): \(String(cString: strerror(e))); it is emptied instead, to stay within \(policy.maxFileBytes) bytes"
        )
      }
      empty(&s)
      return
    }
    let old = s.fd
    s.fd = -1
    close(old)
    reconcile(&s)
  }

  private func empty(_ s: inout State) {
    if ftruncate(s.fd, 0) == 0 { s.size = 0 }
  }

  private static func directory(of path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "" }
    return String(path[..<slash])
  }
}
