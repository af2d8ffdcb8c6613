/// What ELF inspection learned about a file, without loading it.
public struct ELFFacts: Sendable, Hashable {
  public var path: String
  public var fileSize: Int
  public var elfClass: ELFClass
  public var machine: ELFMachine
  /// `ET_DYN` for shared objects.
  public var isSharedObject: Bool
  /// `.dynsym`, with its names kept as bytes: indexing a thousand files makes a string only
  /// for the symbols that can be entry points.
  public var symbolTable: SymbolTable
  /// The content of a `.forsetti.manifest` section, when the module embeds its manifest.
  public var embeddedManifest: [UInt8]?
  /// `DT_NEEDED` entries: the libraries the dynamic loader will have to find.
  public var neededLibraries: [String]
  /// Where the dynamic loader looks for them first (`DT_RUNPATH`, `DT_RPATH`, `DF_1_NODEFLIB`).
  public var searchPaths: LibrarySearchPaths
  /// Whether the file keeps a full symbol table (`.symtab`): not stripped. Packaging shows it
  /// (lintian's `unstripped-binary-or-object`); loading never reads it.
  public var hasSymbolTable: Bool
  /// `DF_1_PIE`: an executable built position-independent, which is `ET_DYN` too but which the
  /// loader refuses to load as a library.
  public var isPositionIndependentExecutable: Bool

  public init(
    path: String, fileSize: Int, elfClass: ELFClass, machine: ELFMachine, isSharedObject: Bool,
    symbolTable: SymbolTable, embeddedManifest: [UInt8]?, neededLibraries: [String],
    searchPaths: LibrarySearchPaths = LibrarySearchPaths(), hasSymbolTable: Bool = false,
    isPositionIndependentExecutable: Bool = false
  ) {
    self.path = path
    self.fileSize = fileSize
    self.elfClass = elfClass
    self.machine = machine
    self.isSharedObject = isSharedObject
    self.symbolTable = symbolTable
    self.embeddedManifest = embeddedManifest
    self.neededLibraries = neededLibraries
    self.searchPaths = searchPaths
    self.hasSymbolTable = hasSymbolTable
    self.isPositionIndependentExecutable = isPositionIndependentExecutable
  }

  /// Every named symbol of `.dynsym`.
  public var dynamicSymbols: [DynamicSymbol] { symbolTable.indices.map(symbolTable.symbol(at:)) }

  /// The symbols a host can call as an entry point: defined, global or weak, default or
  /// protected visibility, functions.
  public var exportedFunctions: [String] {
    symbolTable.indices.filter { symbolTable[$0].isExportedFunction }.map(symbolTable.name(at:))
  }

  public func symbol(named name: String) -> DynamicSymbol? {
    symbolTable.index(of: name).map(symbolTable.symbol(at:))
  }

  /// Whether this file could be loaded by this host (class and machine match).
  public var matchesHost: Bool { elfClass == .host && machine == .host }
}

/// The named entries of `.dynsym`, their names in one NUL-separated copy of the string table.
public struct SymbolTable: Sendable, Hashable {
  /// What one entry says about its symbol; the name is found by offset.
  public struct Entry: Sendable, Hashable {
    /// The `.gnu.version` value of an entry in a file without versions: the plain global name.
    public static let unversioned: UInt16 = 1

    public var nameOffset: UInt32
    public var kind: DynamicSymbol.Kind
    public var binding: DynamicSymbol.Binding
    public var isDefined: Bool
    public var isVisible: Bool
    /// The raw `.gnu.version` value: version index, with 0x8000 set for a non-default version.
    public var versionIndex: UInt16

    /// Whether plain `dlsym` can return this definition (unversioned or a default `@@` version).
    public var isFoundByDlsym: Bool { SymbolVersions.isFoundByDlsym(versionIndex) }

    /// Callable as an entry point: an exported function `dlsym` can find by its bare name.
    public var isExportedFunction: Bool {
      isFoundByDlsym
        && DynamicSymbol.isExportedFunction(
          kind: kind, binding: binding, isDefined: isDefined, isVisible: isVisible)
    }
  }

  /// The string table, ending in NUL; every entry's offset lies before that final NUL.
  var names: [UInt8]
  var entries: [Entry]
  /// Version index → name, from `.gnu.version_d`.
  var versionNames: [UInt16: String]
  /// What the file needs of its libraries' versions, from `.gnu.version_r`.
  public var versionNeeds: [VersionNeed]

  public init() {
    names = [0]
    entries = []
    versionNames = [:]
    versionNeeds = []
  }

  init(
    names: [UInt8], entries: [Entry], versionNames: [UInt16: String] = [:], versionNeeds: [VersionNeed] = []
  ) {
    self.names = names
    self.entries = entries
    self.versionNames = versionNames
    self.versionNeeds = versionNeeds
  }

  /// The versions this file defines (`.gnu.version_d`, its own base name among them); nil when
  /// it has no version definitions, which the loader takes as satisfying any need.
  public var definedVersions: Set<String>? { versionNames.isEmpty ? nil : Set(versionNames.values) }

  /// The names of the undefined symbols that need version index `index` (of `versionNeeds`).
  public func symbols(needing index: UInt16) -> [String] {
    entries.indices.filter {
      !entries[$0].isDefined && entries[$0].versionIndex & ~SymbolVersions.hiddenBit == index
    }.map(name(at:))
  }

  public var indices: Range<Int> { entries.indices }
  public subscript(i: Int) -> Entry { entries[i] }

  /// The name bytes of entry `i`, without the NUL.
  public func withName<R>(at i: Int, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
    names.withUnsafeBufferPointer { all in
      let start = Int(entries[i].nameOffset)
      var end = start
      while all[end] != 0 { end += 1 }
      return body(UnsafeBufferPointer(rebasing: all[start..<end]))
    }
  }

  public func name(at i: Int) -> String { withName(at: i) { String(decoding: $0, as: UTF8.self) } }

  public func symbol(at i: Int) -> DynamicSymbol {
    let e = entries[i]
    let index = e.versionIndex & ~SymbolVersions.hiddenBit
    let version =
      index >= SymbolVersions.firstDefinedIndex && e.isDefined
      ? (versionNames[index] ?? "version index \(index)") : nil
    return DynamicSymbol(
      name: name(at: i), kind: e.kind, binding: e.binding, isDefined: e.isDefined, isVisible: e.isVisible,
      version: version, isDefaultVersion: e.isFoundByDlsym)
  }

  /// The first entry named `name`, compared as bytes.
  public func index(of name: String) -> Int? {
    var key = name
    return key.withUTF8 { wanted in indices.first { i in withName(at: i) { $0.elementsEqual(wanted) } } }
  }

  /// Every entry named `name` (one per version the file has of it), compared as bytes.
  public func indices(of name: String) -> [Int] {
    var key = name
    return key.withUTF8 { wanted in
      indices.filter { i in withName(at: i) { $0.elementsEqual(wanted) } }
    }
  }

  /// Why no entry named `name` can serve as an entry point, or nil when one can (or none
  /// has the name). Several entries are judged together: a name defined only in non-default
  /// versions is reported as such, since that is what there is to fix.
  public func entryPointProblem(named name: String) -> (reason: String, fix: String)? {
    // In version order, so the newest is last and is the one suggested as the default.
    let found = indices(of: name).sorted {
      entries[$0].versionIndex & ~SymbolVersions.hiddenBit < entries[$1].versionIndex & ~SymbolVersions
        .hiddenBit
    }
    .map(symbol(at:))
    guard !found.isEmpty, !found.contains(where: \.isExportedFunction) else { return nil }
    let versionOnly = found.filter { $0.isVersionOnlyProblem }
    if !versionOnly.isEmpty {
      let versions = versionOnly.map { $0.version ?? "?" }
      let spelled = versions.map { "\(name)@\($0)" }.joined(separator: ", ")
      return (
        "it is defined only as non-default version\(versions.count == 1 ? "" : "s") \(versions.joined(separator: ", ")) (\(spelled)), and plain dlsym cannot find a non-default version",
        "export an unversioned \(name), or make one version the default (\(name)@@\(versions.last ?? "VERSION") in the .symver directive or version script)"
      )
    }
    return found.first?.entryPointProblem.map { ($0, "export it as a visible C function") }
  }
}

/// One `.dynsym` entry.
public struct DynamicSymbol: Sendable, Hashable {
  public enum Kind: String, Sendable { case function, object, other }
  public enum Binding: String, Sendable { case local, global, weak, other }

  public var name: String
  public var kind: Kind
  public var binding: Binding
  /// False for an import (`SHN_UNDEF`).
  public var isDefined: Bool
  /// False for hidden or internal visibility.
  public var isVisible: Bool
  /// The GNU version this definition belongs to (`V2` of `name@@V2`), nil when unversioned.
  public var version: String?
  /// False for a non-default version (`name@V1`), which `dlsym` cannot find by the bare name.
  public var isDefaultVersion: Bool

  public init(
    name: String, kind: Kind, binding: Binding, isDefined: Bool, isVisible: Bool, version: String? = nil,
    isDefaultVersion: Bool = true
  ) {
    self.name = name
    self.kind = kind
    self.binding = binding
    self.isDefined = isDefined
    self.isVisible = isVisible
    self.version = version
    self.isDefaultVersion = isDefaultVersion
  }

  public var isExportedFunction: Bool {
    isDefaultVersion
      && Self.isExportedFunction(kind: kind, binding: binding, isDefined: isDefined, isVisible: isVisible)
  }

  /// An exported function in every way but its version: only `dlvsym` could find it.
  var isVersionOnlyProblem: Bool {
    !isDefaultVersion
      && Self.isExportedFunction(kind: kind, binding: binding, isDefined: isDefined, isVisible: isVisible)
  }

  static func isExportedFunction(kind: Kind, binding: Binding, isDefined: Bool, isVisible: Bool) -> Bool {
    kind == .function && isDefined && isVisible && (binding == .global || binding == .weak)
  }

  /// Why this symbol cannot serve as an entry point, or nil when it can.
  public var entryPointProblem: String? {
    if !isDefined { return "it is only imported (undefined), not defined here" }
    if kind != .function { return "it is a \(kind.rawValue), not a function" }
    if binding != .global && binding != .weak { return "it has \(binding.rawValue) binding, not global" }
    if !isVisible { return "it has hidden visibility" }
    if !isDefaultVersion {
      return
        "it is defined only as non-default version \(version ?? "?") (\(name)@\(version ?? "?")), which plain dlsym cannot find"
    }
    return nil
  }
}

/// The search paths a shared object names for its own `DT_NEEDED` libraries, as written
/// (`$ORIGIN` and the other tokens unexpanded: `LibraryResolver` expands them).
public struct LibrarySearchPaths: Sendable, Hashable {
  /// `DT_RUNPATH`: searched after `LD_LIBRARY_PATH`, for this object's own needs only.
  public var runPath: String?
  /// `DT_RPATH`: searched first, for this object and what it loads; ignored when a
  /// `DT_RUNPATH` is present.
  public var rPath: String?
  /// `DF_1_NODEFLIB`: the default directories are not searched, nor the cache's entries that
  /// lie in them.
  public var noDefaultLibraries = false

  public init(runPath: String? = nil, rPath: String? = nil, noDefaultLibraries: Bool = false) {
    self.runPath = runPath
    self.rPath = rPath
    self.noDefaultLibraries = noDefaultLibraries
  }
}

/// ELF class: 32- or 64-bit.
public enum ELFClass: String, Sendable, Hashable {
  case elf32 = "ELF32"
  case elf64 = "ELF64"

  public static var host: ELFClass { MemoryLayout<Int>.size == 8 ? .elf64 : .elf32 }
}

/// ELF machine (`e_machine`), named for the common ones.
public struct ELFMachine: Sendable, Hashable, CustomStringConvertible {
  public var rawValue: UInt16

  public init(rawValue: UInt16) { self.rawValue = rawValue }

  public static let x86 = ELFMachine(rawValue: 3)
  public static let arm = ELFMachine(rawValue: 40)
  public static let x86_64 = ELFMachine(rawValue: 62)
  public static let aarch64 = ELFMachine(rawValue: 183)
  public static let riscv = ELFMachine(rawValue: 243)

  public static var host: ELFMachine {
    #if arch(x86_64)
      .x86_64
    #elseif arch(arm64)
      .aarch64
    #elseif arch(i386)
      .x86
    #elseif arch(arm)
      .arm
    #else
      .riscv
    #endif
  }

  public var description: String {
    switch self {
    case .x86: "x86"
    case .arm: "arm"
    case .x86_64: "x86-64"
    case .aarch64: "aarch64"
    case .riscv: "riscv"
    default: "machine \(rawValue)"
    }
  }
}
