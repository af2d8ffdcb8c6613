/// The oldest system a vendor's binary must load on, as policy data: the newest symbol version
/// of each base library it may need, and the libraries it may expect to find there (the rest it
/// ships beside itself). The idea is auditwheel's manylinux policies; the numbers are each
/// distribution's own glibc and GCC runtime (`lint --glibc`, `lint --target`).
public struct BinaryBaseline: Sendable, Hashable {
  public var name: String
  /// Version prefix → the newest version of it the baseline defines (`GLIBC` → 2.28).
  public var newest: [String: [Int]]
  /// The libraries every such system has.
  public var libraries: Set<String>

  /// What every glibc system with GCC's runtime has: glibc's own libraries, `libgcc_s` and
  /// `libstdc++` (auditwheel's core set, without the X11 and GL ones a module has no use for).
  public static let baseLibraries: Set<String> = [
    "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "libresolv.so.2", "libutil.so.1",
    "libgcc_s.so.1", "libstdc++.so.6", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
  ]

  /// The named baselines: each system's glibc, and the `libstdc++` of its default GCC.
  public static let named: [BinaryBaseline] = [
    .init(name: "debian-10", glibc: [2, 28], glibcxx: [3, 4, 25], cxxabi: [1, 3, 11]),
    .init(name: "rhel-8", glibc: [2, 28], glibcxx: [3, 4, 25], cxxabi: [1, 3, 11]),
    .init(name: "debian-11", glibc: [2, 31], glibcxx: [3, 4, 28], cxxabi: [1, 3, 12]),
    .init(name: "ubuntu-20.04", glibc: [2, 31], glibcxx: [3, 4, 28], cxxabi: [1, 3, 12]),
    .init(name: "ubuntu-22.04", glibc: [2, 35], glibcxx: [3, 4, 30], cxxabi: [1, 3, 13]),
    .init(name: "debian-12", glibc: [2, 36], glibcxx: [3, 4, 30], cxxabi: [1, 3, 13]),
    .init(name: "ubuntu-24.04", glibc: [2, 39], glibcxx: [3, 4, 33], cxxabi: [1, 3, 15]),
  ]

  init(name: String, glibc: [Int], glibcxx: [Int], cxxabi: [Int]) {
    self.name = name
    newest = ["GLIBC": glibc, "GLIBCXX": glibcxx, "CXXABI": cxxabi]
    libraries = Self.baseLibraries
  }

  /// The baseline of `--glibc 2.28`: glibc's versions up to that one, the base libraries;
  /// nil when `text` is not `MAJOR.MINOR`.
  public static func glibc(_ text: String) -> BinaryBaseline? {
    let parts = text.split(separator: ".", omittingEmptySubsequences: false)
    let numbers = parts.compactMap { Int($0) }
    guard parts.count == 2, numbers.count == 2, numbers.allSatisfy({ $0 >= 0 && $0 < 1000 }) else {
      return nil
    }
    return BinaryBaseline(name: "glibc \(text)", newest: ["GLIBC": numbers], libraries: baseLibraries)
  }

  public init(name: String, newest: [String: [Int]], libraries: Set<String>) {
    self.name = name
    self.newest = newest
    self.libraries = libraries
  }

  /// What in the vendor's part of `module`'s closure (the module and the libraries found
  /// through its own search paths) reaches past this baseline.
  public func findings(_ module: ELFFacts, path: String, _ resolution: LibraryResolver.Resolution)
    -> [BaselineFinding]
  {
    let shipped = resolution.found.filter { [.rPath, .runPath, .path].contains($0.source) }
    let shippedNames = Set(shipped.map(\.name))
    let objects =
      [(path, module)] + shipped.compactMap { f in resolution.objects[f.path].map { (f.path, $0) } }
    var out: [BaselineFinding] = []
    var seen: Set<String> = []
    for (objectPath, object) in objects where seen.insert(objectPath).inserted {
      for library in object.neededLibraries
      where !libraries.contains(library) && !shippedNames.contains(library) {
        out.append(.libraryOutside(object: objectPath, library: library, baseline: name))
      }
      for need in object.symbolTable.versionNeeds {
        for v in need.versions {
          guard let (prefix, numbers) = SymbolVersionName.split(v.name), let limit = newest[prefix],
            SymbolVersionName.precedes(limit, numbers)
          else { continue }
          out.append(
            .versionTooNew(
              object: objectPath, library: need.file, version: v.name,
              symbols: object.symbolTable.symbols(needing: v.index),
              newest: "\(prefix)_\(limit.map(String.init).joined(separator: "."))", baseline: name))
        }
      }
    }
    return out
  }
}

/// Where a binary reaches past a baseline.
public enum BaselineFinding: Sendable, Hashable, CustomStringConvertible {
  case versionTooNew(
    object: String, library: String, version: String, symbols: [String], newest: String, baseline: String)
  case libraryOutside(object: String, library: String, baseline: String)

  public var description: String {
    switch self {
    case .versionTooNew(let object, let library, let version, let symbols, let newest, let baseline):
      let shown = symbols.prefix(5).joined(separator: ", ") + (symbols.count > 5 ? ", …" : "")
      return
        "\(object) needs \(version) of \(library)\(symbols.isEmpty ? "" : " (\(shown))"), newer than \(baseline)'s \(newest): "
        + "it will not load there; build it on \(baseline) or older"
    case .libraryOutside(let object, let library, let baseline):
      return
        "\(object) needs \(library), which \(baseline) does not promise: ship it beside the module "
        + "(DT_RUNPATH $ORIGIN/…) or make the package depend on it"
    }
  }
}
