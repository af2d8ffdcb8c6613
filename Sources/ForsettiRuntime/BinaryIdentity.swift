import FoundationEssentials
import Glibc

/// What identifies a binary (for quarantine and version copies): size, modification time and a
/// content hash, so that any rebuild lifts the quarantine (GStreamer's registry blacklists the
/// same way).
package struct BinaryIdentity: Sendable, Hashable {
  package var size: Int
  package var mtimeNanoseconds: Int64
  /// FNV-1a 64 of the content: identity, not security (a changed file lifts quarantine anyway).
  package var hash: UInt64

  package static func of(_ path: String, contents: Data? = nil) -> BinaryIdentity? {
    var st = stat()
    guard stat(path, &st) == 0, let data = contents ?? FileManager.default.contents(atPath: path) else {
      return nil
    }
    var h: UInt64 = 0xcbf2_9ce4_8422_2325
    for b in data {
      h ^= UInt64(b)
      h = h &* 0x100_0000_01b3
    }
    return BinaryIdentity(
      size: Int(st.st_size),
      mtimeNanoseconds: Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec),
      hash: h)
  }
}
