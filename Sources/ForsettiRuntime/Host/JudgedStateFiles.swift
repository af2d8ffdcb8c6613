import Glibc

/// The bytes of the state directory's verdict files (`LiveHost.stateFiles`) as a judgement was
/// about to read them, so that the watcher's news of a write the host has judged already — a
/// control verb's, which reconciles at once, or supervision's quarantine — is not judged a
/// second time. Read before the judge reads: a change made in between is then a difference,
/// and judged; one read after could hide a change the judge never saw.
struct JudgedStateFiles: Equatable {
  /// What one file held: its bytes, absent, or unknown (unreadable or too large to keep), which
  /// equals nothing, so such a file is always judged again.
  enum Content: Equatable {
    case bytes([UInt8])
    case absent
    case unknown

    static func == (a: Content, b: Content) -> Bool {
      switch (a, b) {
      case (.bytes(let x), .bytes(let y)): x == y
      case (.absent, .absent): true
      default: false
      }
    }
  }

  /// A state file larger than this is not kept (approvals of thousands of modules stay far
  /// below it); it is judged again on every change.
  static let maxBytes = 1 << 20

  private(set) var contents: [String: Content] = [:]

  /// The verdict files of `stateDirectory`, read now, through links (a state file may be
  /// delivered through one).
  static func read(_ stateDirectory: String, names: Set<String>) -> JudgedStateFiles {
    var files = JudgedStateFiles()
    let dir = stateDirectory.isEmpty ? "." : stateDirectory
    for name in names { files.contents[name] = content(PathText.join(dir, name)) }
    return files
  }

  private static func content(_ path: String) -> Content {
    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
    guard fd >= 0 else { return errno == ENOENT ? .absent : .unknown }
    defer { close(fd) }
    var st = stat()
    guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return .unknown }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 16384)
    while true {
      let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
      if n < 0 && errno == EINTR { continue }
      guard n >= 0 else { return .unknown }
      if n == 0 { return .bytes(bytes) }
      bytes += chunk[0..<n]
      guard bytes.count <= maxBytes else { return .unknown }
    }
  }
}
