import ForsettiBridge
import FoundationEssentials
import Glibc

/// Trust files delivered from elsewhere through symbolic links, as a fleet delivers them: a
/// Kubernetes ConfigMap volume (`NAME -> ..data/NAME`, `..data -> ..TIMESTAMP`, updated by
/// renaming a new `..data` over the old) or a directory kept by configuration management.
/// Watching the state directory alone misses such an update: the link in it never changes, only
/// what it leads to. So the host watches every directory on the way, and never writes through
/// or over such a link (the delivery would silently lose the file, or be overwritten by it).
package enum DeliveredFiles {
  /// At most this many links are followed for one path, as the kernel's own limit (ELOOP).
  static let maximumLinks = 40

  /// The directories whose change can change what `path` reads: the directory of each link on
  /// the way from `path` to the file or directory it finally names, that one's directory, and,
  /// when it is a directory, itself and the chains of the links directly in it. Empty when
  /// `path` is not a link (nor a directory holding one): then its own directory is all there is
  /// to watch. Each directory is resolved, so inotify watches what the kernel will change.
  package static func directories(of path: String) -> [String] {
    var found: [String] = []
    let (end, links) = resolve(path)
    var isDirectory = false
    let exists = FileManager.default.fileExists(atPath: end, isDirectory: &isDirectory)
    if exists && isDirectory {
      // The links inside a delivered directory (a ConfigMap's `NAME -> ..data/NAME`) lead on.
      for name in (try? FileManager.default.contentsOfDirectory(atPath: end)) ?? [] {
        let entry = PathText.join(end, name)
        guard isLink(entry) else { continue }
        let inside = resolve(entry)
        found.append(contentsOf: inside.links)
        found.append(PathText.parent(inside.end))
      }
    }
    if !links.isEmpty {
      found.append(contentsOf: links)
      // A delivered directory's parent too: a tool that replaces the directory whole renames
      // a new one into place there, which the old directory's own watch never sees.
      if exists && isDirectory { found.append(end) }
      found.append(PathText.parent(end))
    }
    var seen = Set<String>()
    return found.filter { !$0.isEmpty && seen.insert($0).inserted }
  }

  /// Each directory with the identity of what is there now (`PATH@DEVICE:INODE`): a directory
  /// replaced by another of the same name is watched anew, the old one's watch sees nothing.
  package static func identities(_ directories: [String]) -> [String] {
    directories.map { d in
      var st = stat()
      return stat(d, &st) == 0 ? "\(d)@\(st.st_dev):\(st.st_ino)" : d
    }
  }

  /// Whether `path` itself is a symbolic link: a delivered file the host must not replace.
  package static func isLink(_ path: String) -> Bool {
    var st = stat()
    return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFLNK
  }

  /// Where the link at `path` leads, as written in it (nil: not a link).
  package static func target(of path: String) -> String? {
    guard isLink(path) else { return nil }
    return try? FileManager.default.destinationOfSymbolicLink(atPath: path)
  }

  /// `path` with every link followed, component by component, and the resolved directory of
  /// each link met on the way. The directory `path` is in is resolved first and its own links
  /// are not counted: they lead to the state directory, not to a delivery.
  static func resolve(_ path: String) -> (end: String, links: [String]) {
    let parent = PathText.parent(path)
    var prefix = realDirectory(parent.isEmpty ? "." : parent)
    var pending = [PathText.name(path)]
    var links: [String] = []
    var followed = 0
    while let component = pending.first {
      pending.removeFirst()
      if component.isEmpty || component == "." { continue }
      if component == ".." {
        prefix = PathText.parent(prefix).isEmpty ? "/" : PathText.parent(prefix)
        continue
      }
      let candidate = PathText.join(prefix, component)
      guard followed < maximumLinks, let destination = target(of: candidate) else {
        prefix = candidate
        continue
      }
      followed += 1
      links.append(prefix)
      if destination.hasPrefix("/") { prefix = "/" }
      pending.insert(contentsOf: destination.split(separator: "/").map(String.init), at: 0)
    }
    return (prefix, links)
  }

  /// The directory with every link in it followed (itself when it cannot be resolved).
  private static func realDirectory(_ path: String) -> String {
    guard let real = realpath(path, nil) else { return path }
    defer { free(real) }
    return String(cString: real)
  }
}
