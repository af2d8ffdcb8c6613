/// A configuration file (`--config FILE`) that cannot be used as written. Every case names the
/// file, and the line where there is one, so the operator can go straight to it.
public enum ConfigFileError: Error, Sendable, Equatable, CustomStringConvertible {
  /// `--config` names a file that is not there.
  case missing(path: String)
  /// The file exists but cannot be read (permissions, a directory, an I/O error).
  case unreadable(path: String, reason: String)
  /// Larger than `ConfigFile.maximumSize`: not a configuration file.
  case tooLarge(path: String, limit: Int)
  /// The line holds bytes that are not UTF-8.
  case notUTF8(path: String, line: Int)
  /// The line holds a NUL byte.
  case nul(path: String, line: Int)
  /// The line is neither blank, a comment nor `key = value`.
  case malformed(path: String, line: Int, text: String)
  /// The key is no option of the verb.
  case unknownKey(path: String, line: Int, key: String, suggestion: String?)
  /// The key is an option that only makes sense on the command line.
  case refusedKey(path: String, line: Int, key: String)
  /// A flag's value is neither `true` nor `false`.
  case notABoolean(path: String, line: Int, key: String, value: String)
  /// An option that takes a value is given none.
  case emptyValue(path: String, line: Int, key: String)
  /// A key that may appear once appears on both lines.
  case repeated(path: String, key: String, first: Int, second: Int)
  /// The verb refused the value the file gives (`log-rate = many`).
  case invalidValue(path: String, line: Int, key: String, value: String, why: String)
  /// Not a regular file (a FIFO, a directory, a device): `kind` says which.
  case notRegular(path: String, kind: String)
  /// More than one line is wrong: each, in line order.
  case several([ConfigFileError])

  public var description: String {
    switch self {
    case .missing(let p):
      return "\(p): no such configuration file; create it or name another"
    case .unreadable(let p, let why):
      return "\(p): cannot read the configuration file: \(why)"
    case .tooLarge(let p, let limit):
      return "\(p): configuration file larger than \(limit) bytes; is it the right file?"
    case .notUTF8(let p, let l):
      return "\(p):\(l): not UTF-8 text; save the file as UTF-8"
    case .nul(let p, let l):
      return "\(p):\(l): holds a NUL byte; a configuration file is text"
    case .malformed(let p, let l, let text):
      return "\(p):\(l): '\(text)' is not 'option = value' (comments start the line with #)"
    case .unknownKey(let p, let l, let k, let s):
      return "\(p):\(l): unknown option '\(k)'" + (s.map { "; did you mean '\($0)'?" } ?? "")
    case .refusedKey(let p, let l, let k):
      return "\(p):\(l): '\(k)' is for the command line only; remove it from the file"
    case .notABoolean(let p, let l, let k, let v):
      return "\(p):\(l): '\(k)' is a flag: its value is true or false, not '\(v)'"
    case .emptyValue(let p, let l, let k):
      return "\(p):\(l): '\(k)' needs a value; remove the line to use the default"
    case .repeated(let p, let k, let first, let second):
      return "\(p):\(second): '\(k)' is already set on line \(first) and may be given once; keep one"
    case .invalidValue(let p, let l, let k, let v, let why):
      return "\(p):\(l): invalid value '\(v)' for '\(k)': \(why)"
    case .notRegular(let p, let kind):
      return "\(p): is \(kind), not a regular file; name the configuration file itself"
    case .several(let all):
      return "\(all.count) lines of the configuration file are wrong:\n  "
        + all.map(\.description).joined(separator: "\n  ")
    }
  }
}
