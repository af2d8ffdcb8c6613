import ForsettiCore
import Glibc

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
  /// Directories that could not be listed.
  public private(set) var unlistable: [String: String] = [:]

  public init() {}

  /// Indexes every `*.so` (and `*.so.N…`) file directly inside `directories`, in sorted order.
  /// Files are inspected in parallel when there are many; the index is the same either way.
  public static func build(directories: [String]) -> BinaryIndex {
    var index = BinaryIndex()
    var paths: [String] = []
    for dir in directories {
      guard let names = PlainFiles.names(in: dir) else {
        index.unlistable[dir] = "cannot list directory"
        continue
      }
      let prefix = dir.hasSuffix("/") ? dir : dir + "/"
      for name in names.sorted() where isSharedObjectName(name) && !name.hasPrefix(".") {
        paths.append(prefix + name)
      }
    }
    let results = ParallelMap.map(paths.count) { [paths] in ELFInspector.inspect(paths[$0]) }
    index.files.reserveCapacity(paths.count)
    for (path, result) in zip(paths, results) { index.add(path, result) }
    return index
  }

  /// `x.so` or a versioned `x.so.1.2`; not `x.so.sig` (a detached signature) or `x.so.tmp`.
  static func isSharedObjectName(_ name: String) -> Bool {
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
    if files.updateValue(result, forKey: path) == nil { paths.append(path) }
    guard case .success(let facts) = result, facts.matchesHost else { return }
    let table = facts.symbolTable
    for i in table.indices where table[i].isExportedFunction {
      guard table.withName(at: i, Self.isCIdentifier) else { continue }
      exporters[table.name(at: i), default: []].append(path)
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
    files.keys.sorted().compactMap { if case .failure(let e) = files[$0] { return e } else { return nil } }
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
    // Not exported by any usable file: find the files that have the name but cannot serve it
    // (import, object, hidden, foreign architecture). Only failures pay for this scan.
    for path in paths {
      guard case .success(let facts) = files[path], let i = facts.symbolTable.index(of: entryPoint) else {
        continue
      }
      if facts.matchesHost && facts.symbolTable[i].isExportedFunction { continue }
      if !facts.matchesHost {
        return .failure(
          .init(
            .architectureMismatch,
            "\(path) is \(facts.elfClass.rawValue) \(facts.machine); this host needs \(ELFClass.host.rawValue) \(ELFMachine.host); rebuild for this machine"
          ))
      }
      if let why = facts.symbol(named: entryPoint)?.entryPointProblem {
        return .failure(
          .init(
            .entryPointMissing,
            "\(path) has \(entryPoint) in its dynamic symbol table, but \(why); export it as a visible C function"
          ))
      }
    }
    let broken = failures
    if !broken.isEmpty {
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
    switch locate(entryPoint: m.entryPoint) {
    case .success(let facts):
      let (entry, path, cls, machine) = (m.entryPoint, facts.path, facts.elfClass, facts.machine)
      let found: @Sendable () -> String = { "\(entry) exported by \(path) (\(cls.rawValue) \(machine))" }
      guard !trustedKeys.isEmpty else { return .outcome(.pass, passNote: .deferred(found)) }
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
    case .failure(let v):
      return .outcome(.fail(v), passDetail: "")
    }
  }
}
