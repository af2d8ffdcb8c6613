import ForsettiBridge
import FoundationEssentials
import Glibc

/// The one rule for changing a state directory's files: every read-modify-write of approvals,
/// overrides, activation, quarantine and trusted keys runs as one transaction, under an
/// exclusive `flock` on `STATE/state.lock`, and writes through `AtomicFile` (temporary file,
/// fsync, rename, fsync of the directory) before the transaction ends. The command line on the
/// files and a running host answering a control request both go through here, so neither can
/// lose the other's change, and a change is on disk before anything says "done".
///
/// The lock is held only for the transaction: never while waiting on a host or a user.
/// Readers do not take it: a rename replaces a file whole, so they see the old or the new.
/// `STATE/host.lock`, held by a host for its whole life, is a different lock.
package enum StateTransaction {
  /// The lock file's name in the state directory. It is never replaced, unlike the files it
  /// guards (those are renamed over), so every process locks the same inode.
  package static let lockName = "state.lock"

  /// `STATE/state.lock`.
  package static func lockPath(stateDirectory: String) -> String {
    PathText.join(stateDirectory.isEmpty ? "." : stateDirectory, lockName)
  }

  /// The state lock could not be opened or taken.
  package struct LockError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The lock file.
    package var path: String
    package var errno: Int32

    package var description: String { "\(path): cannot be locked: \(String(cString: strerror(errno)))" }
  }

  /// Runs `body` holding the state directory's lock, creating the directory when needed; a
  /// lock that cannot be taken is `lockFailed`'s error. Not re-entrant: `body` must not start
  /// another transaction on the same directory (the lock is per open file, so it would wait
  /// on itself).
  package static func run<T, E: Error>(
    stateDirectory: String, lockFailed: (LockError) -> E, _ body: () throws(E) -> T
  ) throws(E) -> T {
    let fd: Int32
    switch lock(stateDirectory: stateDirectory) {
    case .success(let d): fd = d
    case .failure(let e): throw lockFailed(e)
    }
    // Closing the descriptor releases the lock, also when `body` throws; a process killed
    // inside the transaction releases it too (the kernel closes its files).
    defer { close(fd) }
    return try body()
  }

  /// Replaces `path` with `bytes` atomically and durably (`AtomicFile`), refusing a delivered
  /// one (a symbolic link, `DeliveredFiles`), first removing the temporary files of `path` left
  /// by writers killed mid-write. Only inside `run`: every
  /// writer of a state file holds the lock, so a temporary file of it found then is a dead
  /// writer's, never one still being written.
  package static func write(_ bytes: [UInt8], to path: String, mode: mode_t = 0o644) throws(AtomicFile
    .WriteError)
  {
    // A state file that is a link is delivered: renaming over it would replace the link with
    // a file the delivery no longer updates, and writing through it would change the source.
    if let target = DeliveredFiles.target(of: path) { throw .delivered(path: path, target: target) }
    let dir = PathText.parent(path)
    let prefix = PathText.name(path) + AtomicFile.temporaryMark
    for name in (try? FileManager.default.contentsOfDirectory(atPath: dir.isEmpty ? "." : dir)) ?? []
    where name.hasPrefix(prefix) {
      unlink(PathText.join(dir.isEmpty ? "." : dir, name))
    }
    try AtomicFile.write(bytes, to: path, mode: mode)
  }

  /// Opens and exclusively locks `STATE/state.lock`. The file is opened without following a
  /// symbolic link, so a link planted there cannot make a transaction create a file elsewhere;
  /// read-only is enough for `flock`, for a caller that may write the state but not the lock.
  private static func lock(stateDirectory: String) -> Result<Int32, LockError> {
    let path = lockPath(stateDirectory: stateDirectory)
    let dir = PathText.parent(path)
    if !dir.isEmpty {
      try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }
    var fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644)
    if fd < 0 && errno == EACCES { fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) }
    guard fd >= 0 else { return .failure(LockError(path: path, errno: errno)) }
    while flock(fd, LOCK_EX) != 0 {
      let e = errno
      guard e == EINTR else {
        close(fd)
        return .failure(LockError(path: path, errno: e))
      }
    }
    return .success(fd)
  }
}
