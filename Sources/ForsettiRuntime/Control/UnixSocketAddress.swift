import CForsettiSys
import Glibc

/// A unix socket address for a path, however long: `sun_path` holds 107 bytes, so a longer path
/// is reached through its directory's descriptor (`/proc/self/fd/N/name`), which the kernel
/// resolves like the path itself.
struct UnixSocketAddress {
  private let path: String
  private let directoryFD: Int32?

  init(path: String) {
    if path.utf8.count < 100 {
      self.path = path
      directoryFD = nil
      return
    }
    let slash = path.lastIndex(of: "/")
    let dir = slash.map { String(path[..<$0]) } ?? "."
    let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
    let fd = forsetti_open_directory_path(dir.isEmpty ? "/" : dir)
    directoryFD = fd >= 0 ? fd : nil
    self.path = fd >= 0 ? "/proc/self/fd/\(fd)/\(name)" : path
  }

  /// Calls `body` with the address; false when the path cannot fit even so.
  func with<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R? {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    let capacity = MemoryLayout.size(ofValue: address.sun_path)
    guard bytes.count < capacity else { return nil }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
      for (i, b) in bytes.enumerated() { raw[i] = b }
      raw[bytes.count] = 0
    }
    return withUnsafePointer(to: &address) { p in
      p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        body($0, socklen_t(MemoryLayout<sockaddr_un>.size))
      }
    }
  }

  /// Closes the directory descriptor of a long path.
  func close() { if let directoryFD { _ = Glibc.close(directoryFD) } }
}
