import ForsettiBridge
import FoundationEssentials
import Glibc

/// Writes files so that a crash leaves the old content or the new, never a mix: a temporary
/// file in the same directory, fsync, rename over the target, fsync of the directory.
package enum AtomicFile {
  package enum WriteError: Error, Sendable, Hashable, CustomStringConvertible {
    case failed(path: String, step: String, errno: Int32)
    /// The file is a symbolic link to `target`: delivered from elsewhere, changed only there.
    case delivered(path: String, target: String)

    /// The file that was being written.
    package var path: String {
      switch self {
      case .failed(let p, _, _), .delivered(let p, _): p
      }
    }

    package var description: String {
      switch self {
      case .failed(let p, let step, let e): "\(p): \(step) failed: \(String(cString: strerror(e)))"
      case .delivered(let p, let t):
        "\(p) is a symbolic link to \(t), delivered from elsewhere (a ConfigMap, configuration "
          + "management): change it where it comes from; replacing the link would silently undo the delivery"
      }
    }
  }

  /// What follows a file's name in the name of its temporary file (`NAME.tmp-PID-RANDOM`).
  package static let temporaryMark = ".tmp-"

  /// Replaces `path` with `bytes` atomically, creating parent directories.
  /// `durable: false` skips the fsyncs: still all-or-nothing for readers, but not guaranteed to
  /// survive a power loss; for files that can be made again (version copies).
  package static func write(_ bytes: [UInt8], to path: String, mode: mode_t = 0o644, durable: Bool = true)
    throws(WriteError)
  {
    let dir = PathText.parent(path)
    if !dir.isEmpty {
      try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }
    let tmp = "\(path)\(temporaryMark)\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    let fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
    guard fd >= 0 else { throw .failed(path: path, step: "create temporary file", errno: errno) }
    guard FileDescriptor.writeAll(fd, bytes) else {
      let e = errno
      close(fd)
      unlink(tmp)
      throw .failed(path: path, step: "write", errno: e)
    }
    guard !durable || fsync(fd) == 0 else {
      let e = errno
      close(fd)
      unlink(tmp)
      throw .failed(path: path, step: "fsync", errno: e)
    }
    close(fd)
    guard rename(tmp, path) == 0 else {
      let e = errno
      unlink(tmp)
      throw .failed(path: path, step: "rename", errno: e)
    }
    guard durable else { return }
    // The rename is durable only once the directory is: without this a power loss can bring
    // back the old file after "done" was said. A file system that cannot sync a directory
    // (EINVAL) has nothing more to do.
    let dfd = open(dir.isEmpty ? "." : dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard dfd >= 0 else { throw .failed(path: path, step: "open directory for fsync", errno: errno) }
    defer { close(dfd) }
    while fsync(dfd) != 0 {
      let e = errno
      if e == EINTR { continue }
      if e == EINVAL { return }
      throw .failed(path: path, step: "fsync directory", errno: e)
    }
  }
}
