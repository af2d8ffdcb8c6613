import Glibc

/// Why a program at a path cannot be run by this process — missing, behind a directory this
/// user cannot search, or not executable by it — told apart, since "missing" for a build in a
/// directory only root can enter sent people looking for a file that was there.
package enum ExecutableReach {
  /// nil when this process may execute `path`; else what stops it, in words that name the
  /// directory or file and the user.
  package static func problem(_ path: String) -> String? {
    guard access(path, X_OK) != 0 else { return nil }
    return why(path, links: 0)
  }

  private static func why(_ path: String, links: Int) -> String {
    let uid = geteuid()
    var st = stat()
    guard stat(path, &st) != 0 else {
      return "is not executable by uid \(uid) (mode \(octal(st.st_mode)), owner uid \(st.st_uid))"
    }
    guard errno == EACCES else { return "is missing" }
    // A directory on the way that this user cannot search (x) hides the file.
    var dir = ""
    for part in path.split(separator: "/", omittingEmptySubsequences: true).dropLast() {
      dir += "/" + part
      if access(dir, X_OK) != 0 {
        var d = stat()
        let mode = stat(dir, &d) == 0 ? " (mode \(octal(d.st_mode)), owner uid \(d.st_uid))" : ""
        return "cannot be reached by uid \(uid): the directory \(dir)\(mode) is not searchable by it"
      }
    }
    // The path is a link whose target is what cannot be reached: follow it (a few at most).
    var target = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let n = readlink(path, &target, target.count - 1)
    if n > 0, links < 8 {
      let to = String(decoding: target[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
      let base = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(
        separator: "/")
      return why(to.hasPrefix("/") ? to : base + "/" + to, links: links + 1)
    }
    return "cannot be reached by uid \(uid)"
  }

  private static func octal(_ mode: mode_t) -> String { String(mode & 0o7777, radix: 8) }
}
