import Glibc

/// Where manifests come from. The file system in production; tests may pass another source.
public protocol ManifestSource: Sendable {
  /// Paths of candidate manifest files, relative to the source, in any order.
  func candidateFiles() throws(ManifestSourceError) -> [String]
  /// The bytes of one candidate, at most `limit` of them.
  func read(_ relativePath: String, limit: Int) throws(ManifestSourceError) -> [UInt8]
  /// The source one discovery pass reads its candidates through; it may hold something open
  /// for the pass (a directory). Reads through it must answer as `read` would.
  func openPass() -> any ManifestSource
}

extension ManifestSource {
  /// By default a pass reads through the source itself.
  public func openPass() -> any ManifestSource { self }
}

/// A manifest directory or one of its files could not be read.
public enum ManifestSourceError: Error, Sendable, Hashable, CustomStringConvertible {
  case notADirectory(String)
  case unreadable(path: String, reason: String)
  case tooLarge(path: String, limit: Int)

  public var description: String {
    switch self {
    case .notADirectory(let p): "\(p) is not a directory"
    case .unreadable(let p, let why): "cannot read \(p): \(why)"
    case .tooLarge(let p, let limit): "\(p) is larger than \(limit) bytes; manifests are small JSON files"
    }
  }
}

/// Every `*.json` file below a directory, recursively, skipping hidden entries and JSON Schema
/// documents (`*.schema.json`), which describe manifests but never are one.
///
/// Plain POSIX calls (readdir, open, fstat, read): Foundation's URL-based enumeration cost
/// ~60 µs per file here, most of discovery.
public struct DirectoryManifestSource: ManifestSource {
  public var root: String

  public init(root: String) { self.root = root }

  public func candidateFiles() throws(ManifestSourceError) -> [String] {
    var st = stat()
    guard stat(root, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { throw .notADirectory(root) }
    var out: [String] = []
    var pending: [String] = [""]
    var visited = Set<UInt64>()
    while let rel = pending.popLast() {
      let full = rel.isEmpty ? root : root + "/" + rel
      var dst = stat()
      // Directory symlink loops are cut by remembering each directory's inode.
      guard stat(full, &dst) == 0, visited.insert(UInt64(dst.st_ino) ^ (UInt64(dst.st_dev) << 40)).inserted
      else {
        continue
      }
      guard let dir = opendir(full) else {
        if rel.isEmpty { throw .unreadable(path: root, reason: String(cString: strerror(errno))) }
        continue
      }
      defer { closedir(dir) }
      while let entry = readdir(dir) {
        let name = withUnsafePointer(to: &entry.pointee.d_name) { name in
          // In place: the record is only as long as its name, not the 256 bytes of d_name.
          String(cString: UnsafeRawPointer(name).assumingMemoryBound(to: CChar.self))
        }
        guard !name.hasPrefix(".") else { continue }
        let child = rel.isEmpty ? name : rel + "/" + name
        var type = Int32(entry.pointee.d_type)
        if type == Int32(DT_UNKNOWN) || type == Int32(DT_LNK) {
          var cst = stat()
          guard stat(root + "/" + child, &cst) == 0 else { continue }
          type =
            (cst.st_mode & S_IFMT) == S_IFDIR
            ? Int32(DT_DIR) : ((cst.st_mode & S_IFMT) == S_IFREG ? Int32(DT_REG) : 0)
        }
        if type == Int32(DT_DIR) {
          pending.append(child)
        } else if type == Int32(DT_REG), name.hasSuffix(".json"), !name.hasSuffix(".schema.json") {
          out.append(child)
        }
      }
    }
    return out
  }

  public func read(_ relativePath: String, limit: Int) throws(ManifestSourceError) -> [UInt8] {
    try Self.read(root + "/" + relativePath, relativeTo: AT_FDCWD, as: relativePath, limit: limit)
  }

  /// A pass that opens each candidate relative to the root, opened once: the kernel then walks
  /// one path component per file instead of the root's whole path each time.
  public func openPass() -> any ManifestSource {
    let fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    return fd >= 0 ? DirectoryPass(source: self, directory: fd) : self
  }

  static func read(_ path: String, relativeTo directory: Int32, as relativePath: String, limit: Int)
    throws(ManifestSourceError) -> [UInt8]
  {
    switch PlainFiles.read(path, limit: limit, relativeTo: directory) {
    case .success(let bytes): return bytes
    case .failure(.tooLarge): throw .tooLarge(path: relativePath, limit: limit)
    case .failure(.notRegularFile): throw .unreadable(path: relativePath, reason: "not a regular file")
    case .failure(.system(let e)): throw .unreadable(path: relativePath, reason: String(cString: strerror(e)))
    }
  }
}

/// One discovery pass over a `DirectoryManifestSource`, holding its root open.
final class DirectoryPass: ManifestSource {
  let source: DirectoryManifestSource
  /// The root, open for the life of the pass; only read through, never changed.
  let directory: Int32

  init(source: DirectoryManifestSource, directory: Int32) {
    self.source = source
    self.directory = directory
  }

  deinit { close(directory) }

  func candidateFiles() throws(ManifestSourceError) -> [String] { try source.candidateFiles() }

  func read(_ relativePath: String, limit: Int) throws(ManifestSourceError) -> [UInt8] {
    try DirectoryManifestSource.read(relativePath, relativeTo: directory, as: relativePath, limit: limit)
  }
}
