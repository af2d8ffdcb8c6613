/// Why a file could not be inspected as a module binary. Each case carries the path and what
/// was found, so the message can say what to do.
public enum BinaryError: Error, Sendable, Hashable, CustomStringConvertible {
  case unreadable(path: String, reason: String)
  /// Not an ELF file at all (shows the first bytes).
  case notELF(path: String, leadingBytes: String)
  /// An ELF header that promises more bytes than the file has.
  case truncated(path: String, detail: String)
  /// ELF, but malformed in a way libelf reports.
  case malformed(path: String, detail: String)
  /// ELF, but an executable or object file rather than a shared object.
  case notSharedObject(path: String, fileType: UInt16)

  public var path: String {
    switch self {
    case .unreadable(let p, _), .notELF(let p, _), .truncated(let p, _), .malformed(let p, _),
      .notSharedObject(let p, _):
      p
    }
  }

  public var description: String {
    switch self {
    case .unreadable(let p, let why): "\(p): cannot be read: \(why)"
    case .notELF(let p, let head):
      "\(p): not an ELF file (starts with \(head)); rebuild it as a shared object"
    case .truncated(let p, let d): "\(p): truncated: \(d); the file is incomplete (still being written?)"
    case .malformed(let p, let d): "\(p): malformed ELF: \(d)"
    case .notSharedObject(let p, let t):
      "\(p): ELF file type \(t) is not a shared object (ET_DYN); link it with -shared"
    }
  }
}
