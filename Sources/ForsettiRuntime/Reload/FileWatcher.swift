import CForsettiSys
import ForsettiBridge
import FoundationEssentials
import Glibc
import Synchronization

/// Watches directories with inotify (no polling) and reports complete files: a file counts as
/// changed when it is closed after writing or renamed into place, never while it is written.
package final class FileWatcher: Sendable {
  private let fd: Int32
  /// A pipe `stop` writes to: it wakes the reading thread, which then closes every descriptor.
  private let stopRead: Int32
  private let stopWrite: Int32
  /// The directories asked for: one removed and made again (renamed into place) is watched again.
  private let requested: Set<String>
  private let directories: Mutex<[Int32: String]>
  private let onChange: @Sendable (String, ContinuousClock.Instant) -> Void
  private let recursive: Bool

  package enum WatchError: Error, CustomStringConvertible {
    case unavailable(Int32)
    case directory(String, Int32)

    package var description: String {
      switch self {
      case .unavailable(let e): "inotify is unavailable: \(String(cString: strerror(e)))"
      case .directory(let d, let e): "cannot watch \(d): \(String(cString: strerror(e)))"
      }
    }
  }

  /// Starts watching `directories` (and their subdirectories); `onChange` gets each changed
  /// or removed file's path and when the event was read, on the watcher's thread.
  package init(
    directories: [String], recursive: Bool = true,
    onChange: @escaping @Sendable (String, ContinuousClock.Instant) -> Void
  ) throws(WatchError) {
    let fd = inotify_init1(Int32(IN_CLOEXEC))
    guard fd >= 0 else { throw .unavailable(errno) }
    var pipe: [Int32] = [0, 0]
    guard forsetti_pipe_cloexec(&pipe) == 0 else {
      let e = errno
      close(fd)
      throw .unavailable(e)
    }
    self.fd = fd
    stopRead = pipe[0]
    stopWrite = pipe[1]
    requested = Set(directories)
    self.onChange = onChange
    self.recursive = recursive
    var watched: [Int32: String] = [:]
    let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_CREATE)
    var all = directories
    for d in directories where recursive {
      for rel in (try? FileManager.default.subpathsOfDirectory(atPath: d)) ?? [] {
        var isDir = false
        let full = PathText.join(d, rel)
        if FileManager.default.fileExists(atPath: full, isDirectory: &isDir), isDir {
          all.append(full)
        }
      }
    }
    for d in all {
      let wd = inotify_add_watch(fd, d, mask)
      guard wd >= 0 else {
        let e = errno
        for f in [fd, pipe[0], pipe[1]] { close(f) }
        throw .directory(d, e)
      }
      watched[wd] = d
    }
    self.directories = Mutex(watched)
    _ = DetachedThread.start { [self] in self.readLoop() }
  }

  private let stopped = Atomic<Bool>(false)

  /// Stops watching: the reading thread ends at once and closes the inotify descriptor (a batch
  /// it is already reporting still arrives).
  package func stop() {
    guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
    var one: UInt8 = 1
    _ = write(stopWrite, &one, 1)
  }

  // The reading thread holds the watcher until it ends, so this runs after it: the write end
  // cannot be closed while `stop` may still write to it.
  deinit { close(stopWrite) }

  private func readLoop() {
    let size = 64 * 1024
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 8)
    defer {
      buffer.deallocate()
      close(fd)
      close(stopRead)
    }
    var fds = [
      pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
      pollfd(fd: stopRead, events: Int16(POLLIN), revents: 0),
    ]
    while true {
      let ready = poll(&fds, 2, -1)
      if ready < 0 && errno == EINTR { continue }
      guard ready > 0, fds[1].revents == 0 else { return }
      let n = read(fd, buffer, size)
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { return }
      let now = ContinuousClock.now
      var offset = 0
      while offset + MemoryLayout<inotify_event>.size <= n {
        let event = buffer.load(fromByteOffset: offset, as: inotify_event.self)
        let nameStart = offset + MemoryLayout<inotify_event>.size
        let nameLength = Int(event.len)
        offset = nameStart + nameLength
        guard nameLength > 0, offset <= n else { continue }
        let name = String(cString: buffer.advanced(by: nameStart).assumingMemoryBound(to: CChar.self))
        guard let dir = directories.withLock({ $0[event.wd] }) else { continue }
        let path = PathText.join(dir, name)
        if event.mask & UInt32(IN_ISDIR) != 0 {
          // A new subdirectory of manifests, or a watched directory made again (a directory of
          // licences replaced by a rename): watch it, and say so — its files are new.
          let made = event.mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0
          if made, recursive || requested.contains(path) {
            let wd = inotify_add_watch(
              fd, path, UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_CREATE))
            if wd >= 0 { directories.withLock { $0[wd] = path } }
          }
          if !recursive { onChange(path, now) }
          continue
        }
        // A created file is still being written; it counts when it is closed. A created link is
        // whole at once (`ln -s`), and is never closed after writing.
        if event.mask & UInt32(IN_CREATE) != 0 && !DeliveredFiles.isLink(path) { continue }
        onChange(path, now)
      }
    }
  }
}
