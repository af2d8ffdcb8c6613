import ForsettiCore
import Glibc

/// One `option = value` line of a configuration file.
public struct ConfigEntry: Sendable, Equatable {
  public var key: String
  /// The value as written; `true` or `false` for a flag.
  public var value: String
  /// 1-based, for messages naming `file:line`.
  public var line: Int

  public init(key: String, value: String, line: Int) {
    self.key = key
    self.value = value
    self.line = line
  }
}

/// What a configuration file may hold under one name: a flag (`true`/`false`) or a value, once
/// or on several lines.
public struct ConfigKey: Sendable, Equatable {
  public var name: String
  public var isFlag: Bool
  public var repeatable: Bool

  public init(name: String, isFlag: Bool, repeatable: Bool) {
    self.name = name
    self.isFlag = isFlag
    self.repeatable = repeatable
  }
}

/// The host's configuration file (host.conf, `run --config FILE`, `ForsettiHost.Configuration(file:)`):
/// settings as `key = value` lines, one a line, the keys `run`'s long options.
///
/// The syntax, as systemd reads its unit files: a line whose first non-blank character is `#`
/// is a comment; a `#` anywhere else belongs to the value, because values are paths and paths
/// may hold `#`. Blank lines are skipped, whitespace around key and value is trimmed, and a
/// value wholly inside double quotes loses them (to keep surrounding blanks or a leading `#`).
/// A flag's value is `true` or `false`; a repeatable option is given on several lines.
public struct ConfigFile: Sendable, Equatable {
  /// Where the file was read from, for messages.
  public var path: String
  public var entries: [ConfigEntry]

  public init(path: String, entries: [ConfigEntry]) {
    self.path = path
    self.entries = entries
  }

  /// Bigger than any real configuration: a file this size is a mistake, not a setting.
  public static let maximumSize = 1 << 20

  /// Keys that choose or show the file itself, or ask for help: command line only.
  public static let refusedKeys: Set<String> = ["config", "print-config", "help"]

  /// Parses `bytes` (the file at `path`) against the keys it may hold.
  public static func parse(_ bytes: [UInt8], path: String, keys: [ConfigKey]) throws(ConfigFileError)
    -> ConfigFile
  {
    if bytes.count > maximumSize { throw .tooLarge(path: path, limit: maximumSize) }
    var entries: [ConfigEntry] = []
    var seen: [String: Int] = [:]
    // Every bad line is reported at once: an operator fixing a file one line per run is a
    // round trip per mistake.
    var problems: [ConfigFileError] = []
    var number = 0
    for raw in bytes.split(separator: 0x0A, omittingEmptySubsequences: false) {
      number += 1
      do throws(ConfigFileError) {
        if let entry = try entry(raw, number: number, path: path, keys: keys, seen: &seen) {
          entries.append(entry)
        }
      } catch {
        problems.append(error)
      }
    }
    if problems.count == 1, let only = problems.first { throw only }
    if !problems.isEmpty { throw .several(problems) }
    return ConfigFile(path: path, entries: entries)
  }

  /// Line `number` (its bytes `raw`) as an entry; nil for a blank line or a comment.
  private static func entry(
    _ raw: ArraySlice<UInt8>, number: Int, path: String, keys: [ConfigKey], seen: inout [String: Int]
  ) throws(ConfigFileError) -> ConfigEntry? {
    if raw.contains(0) { throw .nul(path: path, line: number) }
    guard let decoded = String(validating: raw, as: UTF8.self) else {
      throw .notUTF8(path: path, line: number)
    }
    let line = trimmed(Substring(decoded))
    if line.isEmpty || line.hasPrefix("#") { return nil }
    guard let eq = line.firstIndex(of: "=") else {
      throw .malformed(path: path, line: number, text: String(line))
    }
    let key = String(trimmed(line[..<eq]))
    var value = String(trimmed(line[line.index(after: eq)...]))
    if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") {
      value = String(value.dropFirst().dropLast())
    }
    if key.isEmpty { throw .malformed(path: path, line: number, text: String(line)) }
    if refusedKeys.contains(key) { throw .refusedKey(path: path, line: number, key: key) }
    guard let option = keys.first(where: { $0.name == key }) else {
      let names = keys.map(\.name).filter { !refusedKeys.contains($0) }
      throw .unknownKey(
        path: path, line: number, key: key,
        suggestion: Suggestion.closest(to: key.hasPrefix("--") ? String(key.dropFirst(2)) : key, among: names)
      )
    }
    if option.isFlag {
      guard value == "true" || value == "false" else {
        throw .notABoolean(path: path, line: number, key: key, value: value)
      }
    } else if value.isEmpty {
      throw .emptyValue(path: path, line: number, key: key)
    }
    if !option.repeatable, let first = seen[key] {
      throw .repeated(path: path, key: key, first: first, second: number)
    }
    seen[key] = number
    return ConfigEntry(key: key, value: value, line: number)
  }

  /// Reads and parses the file at `path`; a missing file is `.missing`, so the caller decides
  /// whether that matters (the default file may be absent, a named one may not).
  public static func read(_ path: String, keys: [ConfigKey]) throws(ConfigFileError) -> ConfigFile {
    // Not blocking: opening a FIFO for reading would wait for a writer for ever.
    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
    if fd < 0 {
      let code = errno
      if code == ENOENT { throw .missing(path: path) }
      throw .unreadable(path: path, reason: String(cString: strerror(code)))
    }
    defer { close(fd) }
    var st = stat()
    guard fstat(fd, &st) == 0 else { throw .unreadable(path: path, reason: String(cString: strerror(errno))) }
    guard st.st_mode & S_IFMT == S_IFREG else { throw .notRegular(path: path, kind: kind(st.st_mode)) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
      let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
      if n < 0 {
        if errno == EINTR { continue }
        throw .unreadable(path: path, reason: String(cString: strerror(errno)))
      }
      if n == 0 { break }
      bytes.append(contentsOf: chunk[0..<n])
      // One byte past the cap is enough to know; do not read a huge file to its end.
      if bytes.count > maximumSize { throw .tooLarge(path: path, limit: maximumSize) }
    }
    return try parse(bytes, path: path, keys: keys)
  }

  /// What a file that is not a regular one is, in words.
  static func kind(_ mode: mode_t) -> String {
    switch mode & S_IFMT {
    case S_IFIFO: "a FIFO"
    case S_IFDIR: "a directory"
    case S_IFSOCK: "a socket"
    case S_IFCHR: "a character device"
    case S_IFBLK: "a block device"
    default: "not a file"
    }
  }

  static func trimmed(_ s: Substring) -> Substring {
    func blank(_ c: Character) -> Bool { c == " " || c == "\t" || c == "\r" }
    var start = s.startIndex
    var end = s.endIndex
    while start < end, blank(s[start]) { start = s.index(after: start) }
    while end > start, blank(s[s.index(before: end)]) { end = s.index(before: end) }
    return s[start..<end]
  }
}
