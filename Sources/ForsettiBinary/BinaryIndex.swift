import ForsettiCore
import Glibc
import Synchronization

/// Which `.so` files in the plugin directories export which symbols: built from the symbol
/// tables alone, so finding a manifest's binary runs none of its code.
public struct BinaryIndex: Sendable {
  /// Every inspected file, valid or not, by path.
  public private(set) var files: [String: Result<ELFFacts, BinaryError>] = [:]
  /// The inspected paths in the order they were added (directory order, then sorted names).
  public private(set) var paths: [String] = []
  /// Exported function name → paths of host-compatible files exporting it. Only names that are
  /// C identifiers are indexed: a manifest's `entryPoint` can be nothing else, and skipping the
  /// rest (Swift's mangled `$s…` names, thousands per Swift module) keeps indexing cheap.
  public private(set) var exporters: [String: [String]] = [:]
  /// Every other C-identifier name in any inspected file's `.dynsym` (imports, data, hidden,
  /// non-default versions, any name of a foreign-architecture file) → the paths having it, in
  /// `paths` order. Built from `files` when a name is first not found, not while indexing:
  /// most names are imports no manifest asks for, and indexing them was most of the index's
  /// cost; after that, a name in neither table is missing without looking at a symbol.
  private var mentions = Mentions()
  /// Whether each binary found could load here (`BinaryCompatibility`), judged once per file
  /// while this index stands.
  private var compatibility = CompatibilityVerdicts()
  /// How many inspected files failed, so that a missing name needs no walk over the files.
  private var failureCount = 0
  /// Directories that could not be listed.
  public private(set) var unlistable: [String: String] = [:]

  public init() {}

  /// Indexes every `*.so` (and `*.so.N…`) file directly inside `directories`, in sorted order.
  /// Files are inspected in parallel when there are many; the index is the same either way.
  public static func build(directories: [String]) -> BinaryIndex {
    var index = BinaryIndex()
    var paths: [String] = []
    // Each file is opened by its name in its directory, held open for the pass (-1: by path).
    var files: [(name: String, directory: Int32)] = []
    var opened: [Int32] = []
    defer { for fd in opened { close(fd) } }
    for dir in directories {
      guard let names = PlainFiles.names(in: dir) else {
        index.unlistable[dir] = "cannot list directory"
        continue
      }
      let fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
      if fd >= 0 { opened.append(fd) }
      let prefix = dir.hasSuffix("/") ? dir : dir + "/"
      for name in names.sorted() where isSharedObjectName(name) && !name.hasPrefix(".") {
        paths.append(prefix + name)
        files.append((name, fd))
      }
    }
    let results = ParallelMap.map(paths.count) { [paths, files] i in
      files[i].directory >= 0
        ? ELFInspector.inspect(paths[i], name: files[i].name, relativeTo: files[i].directory)
        : ELFInspector.inspect(paths[i])
    }
    index.files.reserveCapacity(paths.count)
    for (path, result) in zip(paths, results) { index.add(path, result) }
    return index
  }

  /// `x.so` or a versioned `x.so.1.2`; not `x.so.sig` (a detached signature) or `x.so.tmp`.
  public static func isSharedObjectName(_ name: String) -> Bool {
    if name.hasSuffix(".so") { return true }
    // The part after the last ".so." must be digits and dots: `libx.so.1.2`.
    let bytes = Array(name.utf8)
    let marker = Array(".so.".utf8)
    guard bytes.count > marker.count else { return false }
    var i = bytes.count - marker.count
    while i >= 0, Array(bytes[i..<i + marker.count]) != marker { i -= 1 }
    guard i >= 0 else { return false }
    let version = bytes[(i + marker.count)...]
    return !version.isEmpty && version.allSatisfy { $0 == UInt8(ascii: ".") || (0x30...0x39).contains($0) }
  }

  /// Adds one file to the index.
  public mutating func add(_ path: String) { add(path, ELFInspector.inspect(path)) }

  mutating func add(_ path: String, _ result: Result<ELFFacts, BinaryError>) {
    // A fresh table, never cleared in place: a copy of this index made before may share it.
    mentions = Mentions()
    compatibility = CompatibilityVerdicts()
    if let old = files.updateValue(result, forKey: path) {
      forget(path, old)
    } else {
      paths.append(path)
    }
    guard case .success(let facts) = result else {
      failureCount += 1
      return
    }
    guard facts.matchesHost else { return }
    let table = facts.symbolTable
    for i in table.indices where table[i].isExportedFunction && table.withName(at: i, Self.isCIdentifier) {
      // A file exporting several versions of a name (name@V1, name@@V2) counts once; its
      // entries are consecutive in this loop, so the last path is the only one to compare.
      Self.appendOnce(path, to: &exporters[table.name(at: i), default: []])
    }
  }

  /// The names no usable file exports → the files having them, built once per state of the
  /// index, on the first name not found.
  private func mentioning(_ name: String) -> [String] {
    mentions.table.withLock { table in
      if let table { return table[name] ?? [] }
      var built: [String: [String]] = [:]
      for path in paths {
        guard case .success(let facts)? = files[path] else { continue }
        let symbols = facts.symbolTable
        for i in symbols.indices where symbols.withName(at: i, Self.isCIdentifier) {
          guard !(facts.matchesHost && symbols[i].isExportedFunction) else { continue }
          Self.appendOnce(path, to: &built[symbols.name(at: i), default: []])
        }
      }
      table = built
      return built[name] ?? []
    }
  }

  /// Appends `path` unless it is already last; through the default subscript's in-place
  /// access, so each name costs one hash lookup (indexing does this for every symbol).
  private static func appendOnce(_ path: String, to list: inout [String]) {
    if list.last != path { list.append(path) }
  }

  /// Removes what an earlier inspection of `path` contributed, before its new result is added.
  private mutating func forget(_ path: String, _ old: Result<ELFFacts, BinaryError>) {
    guard case .success(let facts) = old else {
      failureCount -= 1
      return
    }
    guard facts.matchesHost else { return }
    let table = facts.symbolTable
    for i in table.indices where table[i].isExportedFunction && table.withName(at: i, Self.isCIdentifier) {
      let name = table.name(at: i)
      exporters[name]?.removeAll { $0 == path }
      if exporters[name]?.isEmpty == true { exporters[name] = nil }
    }
  }

  static func isCIdentifier(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
    guard let first = name.first, first == UInt8(ascii: "_") || (first | 0x20) &- 0x61 < 26 else {
      return false
    }
    return name.allSatisfy { b in
      b == UInt8(ascii: "_") || (b | 0x20) &- 0x61 < 26 || b &- 0x30 < 10
    }
  }

  /// The files that failed inspection.
  public var failures: [BinaryError] {
    // Most indexes have none: sorting every path to find none was a millisecond a thousand files.
    guard failureCount > 0 else { return [] }
    return files.keys.sorted().compactMap {
      if case .failure(let e) = files[$0] { return e } else { return nil }
    }
  }

  /// Step 2: the one binary exporting `entryPoint`, or why there is none.
  public func locate(entryPoint: String) -> Result<ELFFacts, GateViolation> {
    let found = exporters[entryPoint] ?? []
    if found.count > 1 {
      return .failure(
        .init(
          .ambiguousEntryPoint,
          "\(entryPoint) is exported by \(found.count) files: \(found.joined(separator: ", ")); keep exactly one"
        ))
    }
    if let path = found.first, case .success(let facts) = files[path] { return .success(facts) }
    // Not exported by any usable file: the files that have the name but cannot serve it
    // (import, object, hidden, non-default version, foreign architecture) are indexed, so a
    // name no file has costs two hash lookups.
    for path in mentioning(entryPoint) {
      guard case .success(let facts) = files[path] else { continue }
      if !facts.matchesHost {
        return .failure(
          .init(
            .architectureMismatch,
            "\(path) is \(facts.elfClass.rawValue) \(facts.machine); this host needs \(ELFClass.host.rawValue) \(ELFMachine.host); rebuild for this machine"
          ))
      }
      guard let problem = facts.symbolTable.entryPointProblem(named: entryPoint) else { continue }
      return .failure(
        .init(
          .entryPointMissing,
          "\(path) has \(entryPoint) in its dynamic symbol table, but \(problem.reason); \(problem.fix)"))
    }
    if failureCount > 0 {
      let broken = failures
      return .failure(
        .init(
          .invalidBinary,
          "no valid binary exports \(entryPoint); these files could not be inspected: "
            + broken.map(\.description).joined(separator: "; ")))
    }
    let inspected = files.count
    let dirsNote =
      unlistable.isEmpty ? "" : " (unlistable: \(unlistable.keys.sorted().joined(separator: ", ")))"
    return .failure(
      .init(
        .binaryNotFound,
        "no .so in the plugin directories exports \(entryPoint) (\(inspected) file\(inspected == 1 ? "" : "s") inspected)\(dirsNote)"
      ))
  }

  /// The gate-stack form of `locate`.
  public func inspectionStep(for m: ModuleManifest) -> BinaryInspectionStep {
    inspectionStep(for: m, trustedKeys: [:])
  }

  /// Step 2 with signing: when `trustedKeys` is not empty, the binary must carry a detached
  /// signature (`FILE.so.sig`) by one of them over its exact bytes (`unsigned`,
  /// `signatureInvalid`), decided before anything is loaded.
  public func inspectionStep(for m: ModuleManifest, trustedKeys: [String: [UInt8]]) -> BinaryInspectionStep {
    inspection(for: m, trustedKeys: trustedKeys).step
  }

  /// Step 2, and the path of the binary when it passed: a caller judging more of that binary
  /// (its signature) need not look it up again.
  public func inspection(for m: ModuleManifest, trustedKeys: [String: [UInt8]] = [:]) -> (
    step: BinaryInspectionStep, binary: String?
  ) {
    switch locate(entryPoint: m.entryPoint) {
    case .success(let facts):
      if let refusal = compatibility.refusal(facts) { return (.outcome(.fail(refusal), passDetail: ""), nil) }
      let (entry, path, cls, machine) = (m.entryPoint, facts.path, facts.elfClass, facts.machine)
      let found: @Sendable () -> String = { "\(entry) exported by \(path) (\(cls.rawValue) \(machine))" }
      guard !trustedKeys.isEmpty else { return (.outcome(.pass, passNote: .deferred(found)), path) }
      return (signed(facts, found: found, trustedKeys: trustedKeys), path)
    case .failure(let v):
      return (.outcome(.fail(v), passDetail: ""), nil)
    }
  }

  /// The signature half of step 2, for a binary found.
  private func signed(_ facts: ELFFacts, found: () -> String, trustedKeys: [String: [UInt8]])
    -> BinaryInspectionStep
  {
    switch ModuleSignature.verify(facts.path, trusted: trustedKeys) {
    case .valid(let keyID): return .outcome(.pass, passDetail: "\(found()); signed by trusted key \(keyID)")
    case .unsigned:
      return .outcome(
        .fail(
          .init(
            .unsigned,
            "\(facts.path) has no signature (\(ModuleSignature.path(for: facts.path))) and this host requires one; sign it with `forsetti-host sign`"
          )), passDetail: "")
    case .invalid(let why): return .outcome(.fail(.init(.signatureInvalid, why)), passDetail: "")
    }
  }
}

/// The compatibility verdicts of a `BinaryIndex`'s binaries (`BinaryCompatibility`), each made
/// on the first judgement that finds the binary and shared by the index's copies until one
/// changes; the libraries are the system's as they were then.
private final class CompatibilityVerdicts: Sendable {
  let table = Mutex<[String: GateViolation?]>([:])

  /// Why `facts` cannot load here, or nil.
  func refusal(_ facts: ELFFacts) -> GateViolation? {
    if let known = table.withLock({ $0[facts.path] }) { return known }
    let resolution = LibraryFactsCache.shared.resolver().resolve(facts, path: facts.path)
    let problems = BinaryCompatibility.problems(facts, path: facts.path, resolution)
    let verdict: GateViolation? =
      problems.isEmpty
      ? nil
      : GateViolation(
        .binaryIncompatible,
        "\(facts.path) cannot be loaded on this system: \(problems.map(\.description).joined(separator: "; ")); "
          + "build it on the oldest system it must run on (check with `forsetti-host lint --plugin FILE --glibc X.Y`) "
          + "or install what it needs")
    table.withLock { $0[facts.path] = verdict }
    return verdict
  }
}

/// The lazily built name table of a `BinaryIndex`, shared by its copies until one changes.
/// A class so that a `let` index can fill it; the lock serialises the threads judging at once.
private final class Mentions: Sendable {
  let table = Mutex<[String: [String]]?>(nil)
}
