/// Whether the dynamic loader could load a module here, judged from the files before anything
/// is loaded: every library of its `DT_NEEDED` closure found (`LibraryResolver`), and every
/// symbol version each object of the closure needs defined by the library the loader maps for
/// that name, as glibc's `_dl_check_map_versions` checks them — a library without version
/// definitions satisfies any need, and a weak need is never a refusal.
public enum BinaryCompatibility {
  /// The first problems reported, at most: a closure missing a whole library would otherwise
  /// list each of its versions.
  static let reported = 8

  /// What stops `module` (inspected from `path`) from loading, given its closure; empty when
  /// nothing does. A miss the resolver could not be sure of is left out (`Missing.uncertain`).
  public static func problems(_ module: ELFFacts, path: String, _ resolution: LibraryResolver.Resolution)
    -> [BinaryIncompatibility]
  {
    var out: [BinaryIncompatibility] = []
    for m in resolution.missing where !m.uncertain {
      out.append(
        .missingLibrary(library: m.name, neededBy: m.neededBy, searched: m.searched, unusable: m.unusable))
    }
    // The loader maps a name once: every later need of it is met by the first object found.
    var mapped: [String: String] = [:]
    for f in resolution.found where mapped[f.name] == nil { mapped[f.name] = f.path }
    let objects =
      [(path, module)] + resolution.found.compactMap { f in resolution.objects[f.path].map { (f.path, $0) } }
    var seen: Set<String> = []
    for (objectPath, object) in objects where seen.insert(objectPath).inserted {
      for need in object.symbolTable.versionNeeds {
        guard let libraryPath = mapped[need.file], let library = resolution.objects[libraryPath],
          let defined = library.symbolTable.definedVersions
        else { continue }
        for v in need.versions where !v.weak && !defined.contains(v.name) {
          out.append(
            .missingVersion(
              library: need.file, path: libraryPath, version: v.name, neededBy: objectPath,
              symbols: object.symbolTable.symbols(needing: v.index),
              newest: BinaryIncompatibility.newest(in: defined, like: v.name)))
        }
      }
    }
    return Array(out.prefix(reported))
  }
}

/// One reason a module cannot load here (`binaryIncompatible`).
public enum BinaryIncompatibility: Sendable, Hashable, CustomStringConvertible {
  /// No place the loader searches holds `library`.
  case missingLibrary(library: String, neededBy: String, searched: [String], unusable: String?)
  /// `library` (at `path`) defines versions, but not `version`, which `symbols` of `neededBy` need.
  case missingVersion(
    library: String, path: String, version: String, neededBy: String, symbols: [String], newest: String?)

  public var description: String {
    switch self {
    case .missingLibrary(let library, let neededBy, let searched, let unusable):
      if let unusable {
        return "\(library), needed by \(neededBy), would be loaded from \(unusable)"
      }
      let places = searched.isEmpty ? "" : " (searched \(searched.joined(separator: ", ")))"
      return "\(library), needed by \(neededBy), is not on this system\(places)"
    case .missingVersion(let library, let path, let version, let neededBy, let symbols, let newest):
      let shown = symbols.prefix(5).joined(separator: ", ") + (symbols.count > 5 ? ", …" : "")
      let what = symbols.isEmpty ? "" : " for \(shown)"
      let has = newest.map { "; its newest of that kind is \($0)" } ?? ""
      return "\(neededBy) needs version \(version) of \(library)\(what), which \(path) does not define\(has)"
    }
  }

  /// The newest of `defined` that shares `wanted`'s prefix (`GLIBC_2.36` for `GLIBC_2.38`),
  /// compared by its dotted numbers; nil when none does.
  static func newest(in defined: Set<String>, like wanted: String) -> String? {
    guard let (prefix, _) = SymbolVersionName.split(wanted) else { return nil }
    return
      defined
      .compactMap { d in SymbolVersionName.split(d).flatMap { $0.prefix == prefix ? (d, $0.numbers) : nil } }
      .max { SymbolVersionName.precedes($0.1, $1.1) }?.0
  }
}

/// A version name of the `PREFIX_1.2.3` kind (`GLIBC_2.34`, `GLIBCXX_3.4.30`, `GCC_7.0.0`).
public enum SymbolVersionName {
  /// `GLIBC_2.34` → ("GLIBC", [2, 34]); nil for a name without dotted numbers after `_`.
  public static func split(_ name: String) -> (prefix: String, numbers: [Int])? {
    guard let underscore = name.lastIndex(of: "_") else { return nil }
    let prefix = String(name[..<underscore])
    let parts = name[name.index(after: underscore)...].split(separator: ".", omittingEmptySubsequences: false)
    let numbers = parts.compactMap { Int($0) }
    guard !prefix.isEmpty, !parts.isEmpty, numbers.count == parts.count else { return nil }
    return (prefix, numbers)
  }

  /// Whether `a` is an older version than `b`, part by part (`[2, 9]` before `[2, 28]`).
  public static func precedes(_ a: [Int], _ b: [Int]) -> Bool {
    for (x, y) in zip(a, b) where x != y { return x < y }
    return a.count < b.count
  }
}
