import Glibc

/// Which files the dynamic loader will map for a module's `DT_NEEDED` libraries, and theirs,
/// found the way glibc's loader finds them: a name with a slash as it is; else `DT_RPATH` of
/// the object and of those that loaded it (when the object has no `DT_RUNPATH`), the object's
/// `DT_RUNPATH`, `ld.so.cache`, then the default directories (the last two not with
/// `DF_1_NODEFLIB`); `$ORIGIN`, `$LIB` and `$PLATFORM` expanded. Nothing is loaded: files are
/// read with libelf. A worker is granted the directories of what this finds, before it
/// confines itself (`LibraryGrants`).
///
/// Not followed: `LD_LIBRARY_PATH` and `LD_PRELOAD` (a worker's loader read its environment
/// when the worker started, before any module was known) and libraries a module `dlopen`s
/// itself at run time.
public struct LibraryResolver: Sendable {
  /// How a library was found.
  public enum Source: String, Sendable, Hashable {
    case path, rPath = "DT_RPATH", runPath = "DT_RUNPATH", cache = "ld.so.cache", defaultDirectory =
      "default directory"
  }

  /// A library the loader would map.
  public struct Found: Sendable, Hashable {
    /// The name as `DT_NEEDED` gives it.
    public var name: String
    /// The object that needs it.
    public var neededBy: String
    /// The path the loader opens.
    public var path: String
    /// `path` with every symbolic link resolved: where the kernel (and landlock) sees the file.
    public var realPath: String
    public var source: Source
  }

  /// A library named by some object that none of the places searched holds.
  public struct Missing: Sendable, Hashable {
    public var name: String
    public var neededBy: String
    /// The directories searched, in order.
    public var searched: [String]
  }

  /// What resolving one module found.
  public struct Resolution: Sendable, Hashable {
    public var found: [Found] = []
    public var missing: [Missing] = []
    /// True when the walk stopped at `LibraryResolver.maxObjects`.
    public var truncated = false

    /// The directories of the real files, each once, in the order found.
    public var directories: [String] {
      var seen: Set<String> = []
      return found.map { Self.parent($0.realPath) }.filter { seen.insert($0).inserted }
    }

    static func parent(_ path: String) -> String {
      guard let slash = path.lastIndex(of: "/") else { return "." }
      return slash == path.startIndex ? "/" : String(path[..<slash])
    }
  }

  /// More objects than any real dependency tree has: a module naming more is cut short.
  public static let maxObjects = 1024

  public var cache: LoaderCache?
  /// Reads the linkage of a candidate file; `ELFInspector.inspect` outside tests.
  public var inspect: @Sendable (String) -> Result<ELFFacts, BinaryError>

  public init(
    cache: LoaderCache?,
    inspect: @escaping @Sendable (String) -> Result<ELFFacts, BinaryError> = { ELFInspector.inspect($0) }
  ) {
    self.cache = cache
    self.inspect = inspect
  }

  /// The loader's default directories for objects of `machine` (Debian's multiarch ones
  /// first, as its glibc searches them).
  public static func defaultDirectories(elfClass: ELFClass, machine: ELFMachine) -> [String] {
    var dirs: [String] = []
    if let triplet = multiarchTriplet(elfClass: elfClass, machine: machine) {
      dirs += ["/lib/\(triplet)", "/usr/lib/\(triplet)"]
    }
    if elfClass == .elf64 { dirs += ["/lib64", "/usr/lib64"] }
    return dirs + ["/lib", "/usr/lib"]
  }

  static func multiarchTriplet(elfClass: ELFClass, machine: ELFMachine) -> String? {
    switch (elfClass, machine) {
    case (.elf64, .x86_64): "x86_64-linux-gnu"
    case (.elf64, .aarch64): "aarch64-linux-gnu"
    case (.elf64, .riscv): "riscv64-linux-gnu"
    case (.elf32, .x86): "i386-linux-gnu"
    case (.elf32, .arm): "arm-linux-gnueabihf"
    default: nil
    }
  }

  static func platform(_ machine: ELFMachine) -> String? {
    switch machine {
    case .x86_64: "x86_64"
    case .aarch64: "aarch64"
    case .x86: "i686"
    case .riscv: "riscv64"
    default: nil
    }
  }

  /// Every library `module` (inspected from `path`, the path the worker loads) needs, and theirs.
  public func resolve(_ module: ELFFacts, path: String) -> Resolution {
    var out = Resolution()
    let flags = LoaderCache.flags(elfClass: module.elfClass, machine: module.machine)
    let defaults = Self.defaultDirectories(elfClass: module.elfClass, machine: module.machine)
    // Each object to visit with the RPATHs of the chain that loaded it (innermost first).
    var queue: [(facts: ELFFacts, path: String, inherited: [String])] = [(module, path, [])]
    // The loader maps a name once: a later DT_NEEDED of the same name is the same object.
    var named: Set<String> = []
    var next = 0
    while next < queue.count {
      let (object, objectPath, inherited) = queue[next]
      next += 1
      // The loader makes a relative path absolute against the working directory.
      let parent = Resolution.parent(objectPath)
      let origin = parent.hasPrefix("/") ? parent : Self.realPath(parent) ?? parent
      let own = object.searchPaths
      let rPaths =
        own.runPath == nil ? expand(own.rPath, origin: origin, object) + inherited : inherited
      let runPaths = expand(own.runPath, origin: origin, object)
      for name in object.neededLibraries where named.insert(name).inserted {
        guard queue.count < Self.maxObjects else {
          out.truncated = true
          return out
        }
        var searched: [String] = []
        var hit: (path: String, facts: ELFFacts, source: Source)?
        if name.contains("/") {
          // A relative one is relative to the worker's working directory, which no grant
          // names: left to the loader, and reported as not found here.
          if name.hasPrefix("/"), let f = candidate(name, like: module) { hit = (name, f, .path) }
          searched.append(name)
        } else {
          let plan: [(dirs: [String], source: Source)] =
            [(rPaths, .rPath), (runPaths, .runPath)]
            + (own.noDefaultLibraries ? [] : [(defaults, .defaultDirectory)])
          search: for (index, step) in plan.enumerated() {
            // The cache comes before the default directories.
            if index == 2, let flags, let cached = cache?.path(for: name, flags: flags) {
              searched.append(LoaderCache.systemPath)
              if let f = candidate(cached, like: module) {
                hit = (cached, f, .cache)
                break search
              }
            }
            for dir in step.dirs {
              let p = dir.hasSuffix("/") ? dir + name : dir + "/" + name
              searched.append(dir)
              if let f = candidate(p, like: module) {
                hit = (p, f, step.source)
                break search
              }
            }
          }
        }
        guard let hit else {
          out.missing.append(Missing(name: name, neededBy: objectPath, searched: searched))
          continue
        }
        out.found.append(
          Found(
            name: name, neededBy: objectPath, path: hit.path, realPath: Self.realPath(hit.path) ?? hit.path,
            source: hit.source))
        queue.append((hit.facts, hit.path, rPaths))
      }
    }
    return out
  }

  /// The facts of `path` when the loader would take it for an object like `module`: an ELF
  /// shared object of the same class and machine. The loader skips any other and searches on.
  private func candidate(_ path: String, like module: ELFFacts) -> ELFFacts? {
    var st = stat()
    guard stat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return nil }
    guard case .success(let f) = inspect(path), f.elfClass == module.elfClass, f.machine == module.machine
    else { return nil }
    return f
  }

  /// The directories of a `DT_RPATH`/`DT_RUNPATH` value with the loader's tokens expanded; an
  /// element with an unknown token, or empty (the working directory), is dropped, as no grant
  /// could name it.
  func expand(_ value: String?, origin: String, _ object: ELFFacts) -> [String] {
    guard let value else { return [] }
    var out: [String] = []
    for element in value.split(separator: ":", omittingEmptySubsequences: true) {
      var s = String(element)
      let tokens: [(String, String?)] = [
        ("ORIGIN", origin),
        (
          "LIB", Self.multiarchTriplet(elfClass: object.elfClass, machine: object.machine).map { "lib/" + $0 }
        ),
        ("PLATFORM", Self.platform(object.machine)),
      ]
      for (token, value) in tokens {
        for spelling in ["${\(token)}", "$\(token)"] where s.contains(spelling) {
          guard let value else { continue }
          s = s.replacing(spelling, with: value)
        }
      }
      guard !s.contains("$"), s.hasPrefix("/") else { continue }
      out.append(s)
    }
    return out
  }

  /// `path` with every link resolved, or nil when it cannot be.
  public static func realPath(_ path: String) -> String? {
    guard let p = Glibc.realpath(path, nil) else { return nil }
    defer { free(p) }
    return String(cString: p)
  }
}
