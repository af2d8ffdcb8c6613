/// The Depends of a module's package from the libraries its `.so` needs, as dpkg-shlibdeps
/// names their packages. dpkg-shlibdeps skips a library no package installs (it takes it for
/// one of the package's own), so its account of each library (`-v`) is read too: a library
/// it could not find, or found in no package, is refused, naming it.
enum SharedLibraryDependencies {
  /// What dpkg-shlibdeps said, read: the packages, or the first library it could not place.
  enum Reading: Equatable {
    case depends([String])
    /// `library` (a NEEDED name), and where it was found when it was.
    case unpackaged(library: String, foundAt: String?)
  }

  /// The arguments for dpkg-shlibdeps, run in the directory above `debian/`; `binary` is the
  /// staged `.so`, relative to that directory (under `debian/PACKAGE/`).
  static func arguments(binary: String) -> [String] { ["-v", "-O", binary] }

  /// Reads dpkg-shlibdeps' `-O -v` output in the C locale: `shlibs:Depends=…` and its debug
  /// account on stdout, its warnings and errors on stderr.
  static func read(stdout: String, stderr: String) -> Reading {
    var foundName: [String: String] = [:]
    for line in (stdout + "\n" + stderr).split(separator: "\n").map(String.init) {
      if let rest = after("Library ", in: line), let range = rest.firstRange(of: " found in ") {
        foundName[String(rest[range.upperBound...])] = String(rest[..<range.lowerBound])
      } else if let rest = after("cannot find library ", in: line) {
        let name = rest.firstRange(of: " needed by ").map { String(rest[..<$0.lowerBound]) } ?? rest
        return .unpackaged(library: name, foundAt: nil)
      } else if let path = after("No associated package found for ", in: line) {
        return .unpackaged(library: foundName[path] ?? basename(path), foundAt: path)
      } else if let rest = after("no dependency information found for ", in: line) {
        let path = rest.firstRange(of: " (used by").map { String(rest[..<$0.lowerBound]) } ?? rest
        return .unpackaged(library: foundName[path] ?? basename(path), foundAt: path)
      }
    }
    var depends: [String] = []
    for line in stdout.split(separator: "\n") where line.hasPrefix("shlibs:Depends=") {
      depends += line.dropFirst("shlibs:Depends=".count).split(separator: ",").map(trimmed).filter {
        !$0.isEmpty
      }
    }
    return .depends(depends)
  }

  /// Whether a NEEDED library is the Swift runtime (or one of the toolchain's libraries).
  static func isSwiftRuntime(_ library: String) -> Bool {
    ["libswift", "libFoundation", "lib_FoundationICU", "libdispatch.so", "libBlocksRuntime"].contains {
      library.hasPrefix($0)
    }
  }

  private static func after(_ marker: String, in line: String) -> String? {
    line.firstRange(of: marker).map { String(line[$0.upperBound...]) }
  }

  private static func trimmed(_ s: Substring) -> String {
    var s = s
    while s.first == " " { s.removeFirst() }
    while s.last == " " { s.removeLast() }
    return String(s)
  }

  private static func basename(_ path: String) -> String {
    path.split(separator: "/").last.map(String.init) ?? path
  }
}
