import Glibc

/// Which files the dynamic loader will map for a module's `DT_NEEDED` libraries, and theirs,
/// found the way glibc's loader finds them: a name with a slash as it is; else `DT_RPATH` of
/// the object and of those that loaded it (when the object has no `DT_RUNPATH`), the object's
/// `DT_RUNPATH`, `ld.so.cache`, then the default directories (with `DF_1_NODEFLIB` neither
/// these nor the cache's entries in them); `$ORIGIN`, `$LIB` and `$PLATFORM` expanded. A file
/// of another class or machine is passed by; any other file by the name that the loader
/// cannot load ends the search, as it ends the load. Nothing is loaded: files are read with
/// libelf. A worker is granted the directories of what this finds, before it confines itself
/// (`LibraryGrants`).
///
/// Not followed: `LD_LIBRARY_PATH` and `LD_PRELOAD` (a worker's loader read its environment
/// when the worker started, before any module was known) and libraries a module `dlopen`s
/// itself at run time; the `DT_RPATH` of the worker executable, which has none; the
/// `glibc-hwcaps` and legacy hardware subdirectories the loader tries first in each directory
/// (a grant of the directory covers them; a library found only there is reported missing).
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
    /// The file the loader would stop at, and why (`/opt/x/libz.so.1: invalid ELF header`),
    /// when it finds one by that name it cannot load: the load fails there, whatever lies
    /// further on the path. nil when no place holds the name.
    public var unusable: String?
    /// Whether the search could not be the loader's own: a token without a value here, a
    /// relative path, a search path naming `$PLATFORM`. Such a miss is reported, never judged.
    public var uncertain = false

    public init(name: String, neededBy: String, searched: [String], unusable: String? = nil) {
      self.name = name
      self.neededBy = neededBy
      self.searched = searched
      self.unusable = unusable
    }
  }

  /// What resolving one module found.
  public struct Resolution: Sendable, Hashable {
    public var found: [Found] = []
    public var missing: [Missing] = []
    /// What each object found (by the path the loader opens) says of itself: its version needs
    /// and definitions (`BinaryCompatibility`).
    public var objects: [String: ELFFacts] = [:]
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

  /// The loader's default directories for objects of `machine`: Debian's, the multiarch ones
  /// first (`/lib64` is no search directory of Debian's glibc; the loader's own link there
  /// is found by its absolute name). Elsewhere `/lib64`, `/usr/lib64` for 64-bit objects.
  public static func defaultDirectories(elfClass: ELFClass, machine: ELFMachine) -> [String] {
    if let triplet = multiarchTriplet(elfClass: elfClass, machine: machine) {
      return ["/lib/\(triplet)", "/usr/lib/\(triplet)", "/lib", "/usr/lib"]
    }
    return elfClass == .elf64 ? ["/lib64", "/usr/lib64"] : ["/lib", "/usr/lib"]
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

  /// What the loader expands `$PLATFORM` to, where that is fixed: on x86-64 glibc picks
  /// `haswell` or `xeon_phi` by the CPU's features, so it is not known here, and an element
  /// naming it is dropped (its libraries reported missing rather than guessed).
  static func platform(_ machine: ELFMachine) -> String? {
    switch machine {
    case .aarch64: "aarch64"
    default: nil
    }
  }

  /// Every library `module` (inspected from `path`, the path the worker loads) needs, and theirs.
  public func resolve(_ module: ELFFacts, path: String) -> Resolution {
    var out = Resolution()
    let flags = LoaderCache.flags(elfClass: module.elfClass, machine: module.machine)
    let defaults = Self.defaultDirectories(elfClass: module.elfClass, machine: module.machine)
    // Each object to visit with the DT_RPATHs of the chain that loaded it (innermost first).
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
      // An object with a DT_RUNPATH has its DT_RPATH ignored, and searches no DT_RPATH at all,
      // not even those of the objects that loaded it; what it loads still searches those.
      let chain = (own.runPath == nil ? expand(own.rPath, origin: origin, object) : []) + inherited
      let rPaths = own.runPath == nil ? chain : []
      let runPaths = expand(own.runPath, origin: origin, object)
      for name in object.neededLibraries where named.insert(name).inserted {
        guard queue.count < Self.maxObjects else {
          out.truncated = true
          return out
        }
        var search = Search(name: name)
        // The loader expands the tokens of a DT_NEEDED name too ($ORIGIN/libx.so).
        switch expandTokens(name, origin: origin, object) {
        case nil:
          search.stop = "\(name): a token in the name has no value here"
        case let expanded? where expanded.contains("/"):
          // A relative one is relative to the worker's working directory, which no grant
          // names: left to the loader, and reported as not found here.
          search.searched.append(expanded)
          if expanded.hasPrefix("/") { search.consider(expanded, .path, examine(expanded, like: module)) }
        case let expanded?:
          search.inDirectories(rPaths, .rPath, self, like: module, file: expanded)
          search.inDirectories(runPaths, .runPath, self, like: module, file: expanded)
          if search.open, let flags, let cache {
            search.searched.append(LoaderCache.systemPath)
            // With DF_1_NODEFLIB the loader still takes the cache's word for a library outside
            // the default directories (one of ld.so.conf's).
            if let cached = cache.path(for: expanded, flags: flags),
              !own.noDefaultLibraries || !Self.isBeneath(cached, defaults)
            {
              search.consider(cached, .cache, examine(cached, like: module))
            }
          }
          if !own.noDefaultLibraries {
            search.inDirectories(defaults, .defaultDirectory, self, like: module, file: expanded)
          }
        }
        guard let hit = search.hit else {
          var missing = Missing(
            name: name, neededBy: objectPath, searched: search.searched, unusable: search.stop)
          missing.uncertain =
            name.contains("$") || name.contains("/")
            || [own.rPath, own.runPath].contains { $0?.contains("PLATFORM") == true }
            || chain.contains { $0.contains("PLATFORM") }
          out.missing.append(missing)
          continue
        }
        out.found.append(
          Found(
            name: name, neededBy: objectPath, path: hit.path, realPath: Self.realPath(hit.path) ?? hit.path,
            source: hit.source))
        out.objects[hit.path] = hit.facts
        queue.append((hit.facts, hit.path, chain))
      }
    }
    return out
  }

  /// Whether `path` lies in one of `directories` or beneath: the loader compares the start of
  /// the cache's path with each default directory and its slash.
  static func isBeneath(_ path: String, _ directories: [String]) -> Bool {
    directories.contains { path.hasPrefix($0.hasSuffix("/") ? $0 : $0 + "/") }
  }

  /// One name's search: the places tried, and how it ended.
  private struct Search {
    var name: String
    var searched: [String] = []
    var hit: (path: String, facts: ELFFacts, source: Source)?
    /// The file the loader stops at, and why: the search ends there without a library.
    var stop: String?

    /// Whether the search goes on.
    var open: Bool { hit == nil && stop == nil }

    mutating func consider(_ path: String, _ source: Source, _ verdict: Verdict) {
      switch verdict {
      case .take(let facts): hit = (path, facts, source)
      case .skip: break
      case .stop(let why): stop = "\(path): \(why)"
      }
    }

    mutating func inDirectories(
      _ dirs: [String], _ source: Source, _ resolver: LibraryResolver, like module: ELFFacts, file: String
    ) {
      for dir in dirs where open {
        let p = dir.hasSuffix("/") ? dir + file : dir + "/" + file
        searched.append(dir)
        consider(p, source, resolver.examine(p, like: module))
      }
    }
  }

  /// What the loader does with a file it finds under the name it looks for.
  enum Verdict {
    /// Maps it: an ELF shared object of the module's class and machine.
    case take(ELFFacts)
    /// Passes it by and searches on: absent, unreadable, or ELF of another class or machine.
    case skip
    /// Stops with an error: anything else by that name ends the load (glibc's `open_verify`).
    case stop(String)
  }

  /// The verdict glibc's loader reaches on `path` for an object like `module`, checking what
  /// it checks in the order it does. The file is opened without blocking (a FIFO by that name
  /// would hold the loader, never the host) and only a regular file is read.
  func examine(_ path: String, like module: ELFFacts) -> Verdict {
    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
    guard fd >= 0 else { return .skip }
    defer { close(fd) }
    var st = stat()
    guard fstat(fd, &st) == 0 else { return .skip }
    if st.st_mode & S_IFMT == S_IFDIR { return .stop("cannot read file data: it is a directory") }
    guard st.st_mode & S_IFMT == S_IFREG else { return .stop("not a regular file") }
    let headerSize = module.elfClass == .elf64 ? 64 : 52
    var head = [UInt8](repeating: 0, count: headerSize)
    let got = head.withUnsafeMutableBytes { pread(fd, $0.baseAddress, headerSize, 0) }
    guard got == headerSize else { return .stop(got < 0 ? "cannot read file data" : "file too short") }
    guard head.starts(with: [0x7F, 0x45, 0x4C, 0x46]) else { return .stop("invalid ELF header") }
    // Another class is passed by: a 32-bit library beside 64-bit ones is no error.
    guard head[4] == (module.elfClass == .elf64 ? 2 : 1) else { return .skip }
    guard head[5] == (1.littleEndian == 1 ? 1 : 2) else {
      return .stop("ELF file data encoding is not the host's")
    }
    guard head[6] == 1 else { return .stop("ELF file version ident does not match current one") }
    // SYSV, or GNU (objects using IFUNC or unique symbols).
    guard head[7] == 0 || head[7] == 3 else { return .stop("ELF file OS ABI invalid") }
    guard head[7] == 3 || head[8] == 0 else { return .stop("ELF file ABI version invalid") }
    guard head[9..<16].allSatisfy({ $0 == 0 }) else { return .stop("nonzero padding in e_ident") }
    let type = UInt16(head[16]) | UInt16(head[17]) << 8
    let machine = UInt16(head[18]) | UInt16(head[19]) << 8
    guard machine == module.machine.rawValue else { return .skip }
    if type == UInt16(ET_EXEC) { return .stop("cannot dynamically load executable") }
    guard type == UInt16(ET_DYN) else { return .stop("only ET_DYN and ET_EXEC can be loaded") }
    switch inspect(path) {
    case .failure(let e):
      // The loader would map it; what it needs in turn cannot be read here, so it is not
      // granted (the worker's load fails and says so) rather than granted blind.
      return .stop("cannot be inspected: \(e)")
    case .success(let f) where f.isPositionIndependentExecutable:
      return .stop("cannot dynamically load position-independent executable")
    case .success(let f):
      return .take(f)
    }
  }

  /// The directories of a `DT_RPATH`/`DT_RUNPATH` value with the loader's tokens expanded; an
  /// element whose token has no value here is dropped, as the loader drops it, and so is one
  /// left relative (the working directory's), as no grant could name it.
  func expand(_ value: String?, origin: String, _ object: ELFFacts) -> [String] {
    guard let value else { return [] }
    return value.split(separator: ":", omittingEmptySubsequences: true).compactMap { element in
      guard let s = expandTokens(String(element), origin: origin, object), s.hasPrefix("/") else {
        return nil
      }
      return s
    }
  }

  /// `text` with `$ORIGIN`, `$LIB` and `$PLATFORM` (or `${…}`) replaced as glibc's
  /// `_dl_dst_substitute` does: a token is its name not followed by a letter, digit or `_`
  /// (`$ORIGINAL` is no token), any other `$` stays as it is; nil when a token has no value.
  func expandTokens(_ text: String, origin: String, _ object: ELFFacts) -> String? {
    guard text.contains("$") else { return text }
    let values: [(name: String, value: String?)] = [
      ("ORIGIN", origin),
      ("PLATFORM", Self.platform(object.machine)),
      ("LIB", Self.multiarchTriplet(elfClass: object.elfClass, machine: object.machine).map { "lib/" + $0 }),
    ]
    let bytes = Array(text.utf8)
    var out: [UInt8] = []
    var i = 0
    scan: while i < bytes.count {
      guard bytes[i] == UInt8(ascii: "$") else {
        out.append(bytes[i])
        i += 1
        continue
      }
      let curly = i + 1 < bytes.count && bytes[i + 1] == UInt8(ascii: "{")
      let start = i + (curly ? 2 : 1)
      for (name, value) in values {
        let n = Array(name.utf8)
        let end = start + n.count
        guard end <= bytes.count, Array(bytes[start..<end]) == n else { continue }
        if curly {
          guard end < bytes.count, bytes[end] == UInt8(ascii: "}") else { continue }
        } else if end < bytes.count, Self.isIdentifier(bytes[end]) {
          continue
        }
        guard let value else { return nil }
        out += Array(value.utf8)
        i = end + (curly ? 1 : 0)
        continue scan
      }
      out.append(bytes[i])
      i += 1
    }
    return String(decoding: out, as: UTF8.self)
  }

  private static func isIdentifier(_ b: UInt8) -> Bool {
    (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "z")) || (b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z"))
      || (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")) || b == UInt8(ascii: "_")
  }

  /// `path` with every link resolved, or nil when it cannot be.
  public static func realPath(_ path: String) -> String? {
    guard let p = Glibc.realpath(path, nil) else { return nil }
    defer { free(p) }
    return String(cString: p)
  }
}
