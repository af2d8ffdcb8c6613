import ForsettiBridge
import Foundation
import Glibc
import Synchronization

/// Watches directories with inotify (no polling) and reports complete files: a file counts as
/// changed when it is closed after writing or renamed into place, never while it is written.
public final class FileWatcher: Sendable {
  private let fd: Int32
  private let directories: Mutex<[Int32: String]>
  private let onChange: @Sendable (String, ContinuousClock.Instant) -> Void
  private let recursive: Bool

  public enum WatchError: Error, CustomStringConvertible {
    case unavailable(Int32)
    case directory(String, Int32)

    public var description: String {
      switch self {
      case .unavailable(let e): "inotify is unavailable: \(String(cString: strerror(e)))"
      case .directory(let d, let e): "cannot watch \(d): \(String(cString: strerror(e)))"
      }
    }
  }

  /// Starts watching `directories` (and their subdirectories); `onChange` gets each changed
  /// or removed file's path and when the event was read, on the watcher's thread.
  public init(
    directories: [String], recursive: Bool = true,
    onChange: @escaping @Sendable (String, ContinuousClock.Instant) -> Void
  ) throws(WatchError) {
    let fd = inotify_init1(Int32(IN_CLOEXEC))
    guard fd >= 0 else { throw .unavailable(errno) }
    self.fd = fd
    self.onChange = onChange
    self.recursive = recursive
    var watched: [Int32: String] = [:]
    let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_CREATE)
    var all = directories
    for d in directories where recursive {
      if let walker = FileManager.default.enumerator(atPath: d) {
        for case let rel as String in walker {
          var isDir: ObjCBool = false
          let full = (d as NSString).appendingPathComponent(rel)
          if FileManager.default.fileExists(atPath: full, isDirectory: &isDir), isDir.boolValue {
            all.append(full)
          }
        }
      }
    }
    for d in all {
      let wd = inotify_add_watch(fd, d, mask)
      guard wd >= 0 else {
        close(fd)
        throw .directory(d, errno)
      }
      watched[wd] = d
    }
    self.directories = Mutex(watched)
    Thread { [self] in self.readLoop() }.start()
  }

  private func readLoop() {
    let size = 64 * 1024
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 8)
    defer { buffer.deallocate() }
    while true {
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
        let path = (dir as NSString).appendingPathComponent(name)
        if event.mask & UInt32(IN_ISDIR) != 0 {
          // A new subdirectory of manifests: watch it too.
          if recursive, event.mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0 {
            let wd = inotify_add_watch(
              fd, path, UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_CREATE))
            if wd >= 0 { directories.withLock { $0[wd] = path } }
          }
          continue
        }
        // A created file is still being written; it counts when it is closed.
        if event.mask & UInt32(IN_CREATE) != 0 { continue }
        onChange(path, now)
      }
    }
  }
}
