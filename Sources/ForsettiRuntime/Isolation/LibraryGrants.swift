import ForsettiBinary
import Glibc

/// Which directories a worker may read and map beyond the system's: those of the libraries its
/// module needs (`LibraryResolver`), granted read/execute (never write) before it confines
/// itself. A module's `DT_RUNPATH` is its vendor's word, so a directory is refused where a grant
/// would open more than libraries: the root, the kernel's file systems, a directory anyone may
/// write, and anything above, at or below the host's state or export directory (other
/// modules' sandboxes and files).
package struct LibraryGrants: Sendable, Hashable {
  /// A directory not granted, and why.
  package struct Refusal: Sendable, Hashable, CustomStringConvertible {
    package var directory: String
    /// The library found there, as `DT_NEEDED` names it.
    package var library: String
    package var reason: String
    package var description: String { "\(directory) (\(library)): \(reason)" }
  }

  /// Directories granted read/execute, in the order their libraries were found.
  package var granted: [String] = []
  package var refused: [Refusal] = []
  /// Libraries no searched place holds: the loader will fail on them in the worker.
  package var missing: [LibraryResolver.Missing] = []

  /// Kernel file systems: a library "found" there is the host's own process or a device.
  static let kernelTrees = ["/proc", "/sys", "/dev", "/run"]

  /// The grants for `resolution`, given the directories modules write (`protected`: the state
  /// directory, the export directory) and a way to ask whether anyone may write a directory.
  package static func decide(
    _ resolution: LibraryResolver.Resolution, protected: [String],
    anyoneWrites: (String) -> Bool = LibraryGrants.anyoneWrites
  ) -> LibraryGrants {
    var out = LibraryGrants(missing: resolution.missing)
    var seen: Set<String> = []
    for found in resolution.found {
      let dir = PathText.parent(found.realPath)
      guard seen.insert(dir).inserted else { continue }
      if let reason = refusal(dir, protected: protected, anyoneWrites: anyoneWrites) {
        out.refused.append(Refusal(directory: dir, library: found.name, reason: reason))
      } else {
        out.granted.append(dir)
      }
    }
    return out
  }

  /// Why `dir` must not be granted, or nil when it may be.
  static func refusal(_ dir: String, protected: [String], anyoneWrites: (String) -> Bool) -> String? {
    if dir == "/" { return "the root directory: a grant there would open every file" }
    if let tree = kernelTrees.first(where: { PathText.isWithin(dir, $0) }) {
      return "inside \(tree), not a directory of libraries"
    }
    for p in protected where PathText.isWithin(dir, p) || PathText.isWithin(p, dir) {
      return "overlaps \(p), where modules write: a module may not load code from there"
    }
    if anyoneWrites(dir) {
      return "anyone may write there: a grant would let a module read what others leave"
    }
    return nil
  }

  /// Whether `dir` is writable by every user (`o+w`, as /tmp is).
  package static func anyoneWrites(_ dir: String) -> Bool {
    var st = stat()
    return stat(dir, &st) == 0 && st.st_mode & S_IWOTH != 0
  }

  /// One line for the host's log and `explain`: "granted A, B; refused C (lib): why".
  package var summary: String {
    var parts: [String] = []
    parts.append(
      granted.isEmpty ? "no directory beyond the system's" : "granted " + granted.joined(separator: ", "))
    if !refused.isEmpty { parts.append("REFUSED " + refused.map(\.description).joined(separator: "; ")) }
    if !missing.isEmpty {
      parts.append(
        "not found: "
          + missing.map { m in
            "\(m.name) (needed by \(m.neededBy)\(m.unusable.map { "; the loader stops at \($0)" } ?? ""))"
          }.joined(separator: ", "))
    }
    return parts.joined(separator: "; ")
  }
}
