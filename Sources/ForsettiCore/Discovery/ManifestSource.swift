import Foundation

/// Where manifests come from. The file system in production; tests may pass another source.
public protocol ManifestSource: Sendable {
  /// Paths of candidate manifest files, relative to the source, in any order.
  func candidateFiles() throws(ManifestSourceError) -> [String]
  /// The bytes of one candidate, at most `limit` of them.
  func read(_ relativePath: String, limit: Int) throws(ManifestSourceError) -> [UInt8]
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
public struct DirectoryManifestSource: ManifestSource {
  public var root: String

  public init(root: String) { self.root = root }

  public func candidateFiles() throws(ManifestSourceError) -> [String] {
    var isDir: ObjCBool = false
    guard FileManager.default.fileExists(atPath: root, isDirectory: &isDir), isDir.boolValue else {
      throw .notADirectory(root)
    }
    let base = URL(fileURLWithPath: root, isDirectory: true).standardizedFileURL
    guard
      let walker = FileManager.default.enumerator(
        at: base, includingPropertiesForKeys: [.isRegularFileKey], options: [.skipsHiddenFiles])
    else { throw .unreadable(path: root, reason: "cannot list the directory") }
    var out: [String] = []
    let prefix = base.path.hasSuffix("/") ? base.path : base.path + "/"
    for case let url as URL in walker {
      let name = url.lastPathComponent
      guard name.hasSuffix(".json"), !name.hasSuffix(".schema.json") else { continue }
      guard (try? url.resourceValues(forKeys: [.isRegularFileKey]))?.isRegularFile == true else { continue }
      let path = url.standardizedFileURL.path
      out.append(path.hasPrefix(prefix) ? String(path.dropFirst(prefix.count)) : name)
    }
    return out
  }

  public func read(_ relativePath: String, limit: Int) throws(ManifestSourceError) -> [UInt8] {
    let path = (root as NSString).appendingPathComponent(relativePath)
    guard let handle = FileHandle(forReadingAtPath: path) else {
      throw .unreadable(path: relativePath, reason: String(cString: strerror(errno)))
    }
    defer { try? handle.close() }
    let data: Data
    do { data = try handle.read(upToCount: limit + 1) ?? Data() } catch {
      throw .unreadable(path: relativePath, reason: "\(error.localizedDescription)")
    }
    if data.count > limit { throw .tooLarge(path: relativePath, limit: limit) }
    return [UInt8](data)
  }
}
