import Glibc

/// One host per state directory: `STATE/host.lock`, held with `flock` for the host's life (the
/// kernel lets go when the process ends, however it ends) and holding the holder's pid. A host
/// takes it in the directory it holds (`StateDirectoryHold`), not at whatever the path names.
package final class HostLock: Sendable {
  private let fd: Int32
  package let path: String

  /// Why the lock could not be taken.
  package enum LockError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Another host holds it: its pid, as it wrote it.
    case held(pid: Int32?, path: String)
    case io(path: String, errno: Int32)

    package var description: String {
      switch self {
      case .held(let pid, let path):
        "another host\(pid.map { " (pid \($0))" } ?? "") is running on \(Self.directory(of: path)); stop it first, or give this one another state directory"
      case .io(let path, let e): "\(path): \(String(cString: strerror(e)))"
      }
    }

    static func directory(of path: String) -> String {
      path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
    }
  }

  /// Takes the lock of `stateDirectory`, or says who holds it.
  package convenience init(stateDirectory: String) throws(LockError) {
    try self.init(path: (stateDirectory.isEmpty ? "." : stateDirectory) + "/host.lock", in: AT_FDCWD)
  }

  /// Takes the lock of the directory `hold` holds, whatever is at its path now: `host.lock` is
  /// opened in the open directory, so a directory swapped in under the same name between the
  /// hold and the lock is never locked for this host (a host on it takes its own lock).
  package convenience init(in hold: StateDirectoryHold) throws(LockError) {
    try self.init(path: hold.path + "/host.lock", in: hold.fd)
  }

  /// The lock an image of this process took before an upgrade (`Handover`): the descriptor is
  /// locked already (a lock belongs to the open file, which `execve` kept), its pid is this one.
  package init(adopting fd: Int32, path: String) {
    self.fd = fd
    self.path = path
    _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
  }

  /// The descriptor, for a handover; it stays this lock's.
  package var descriptor: Int32 { fd }

  private init(path: String, in directory: Int32) throws(LockError) {
    self.path = path
    let fd = openat(
      directory, directory == AT_FDCWD ? path : "host.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
    guard fd >= 0 else { throw .io(path: path, errno: errno) }
    guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
      let e = errno
      let holder = Self.pid(in: fd)
      Glibc.close(fd)
      if e == EWOULDBLOCK { throw .held(pid: holder, path: path) }
      throw .io(path: path, errno: e)
    }
    self.fd = fd
    let text = Array("\(getpid())\n".utf8)
    _ = ftruncate(fd, 0)
    _ = text.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
  }

  deinit {
    // Unlocked before it is closed: a child forked by another thread that has not yet reached
    // its exec shares the open file, and with it the lock, which closing our descriptor alone
    // would leave held until that child execs or exits (a test saw the next host refused).
    _ = flock(fd, LOCK_UN)
    Glibc.close(fd)
  }

  /// The pid a lock file holds.
  private static func pid(in fd: Int32) -> Int32? {
    var buffer = [UInt8](repeating: 0, count: 16)
    let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 15, 0) }
    guard n > 0 else { return nil }
    return Int32(String(decoding: buffer[0..<n], as: UTF8.self).trimmingWhitespace)
  }
}

extension String {
  fileprivate var trimmingWhitespace: String {
    String(self.drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
  }
}
