import ForsettiCore
import Foundation

/// Which `.so` files in the plugin directories export which symbols: built from the symbol
/// tables alone, so finding a manifest's binary runs none of its code.
public struct BinaryIndex: Sendable {
  /// Every inspected file, valid or not, by path.
  public private(set) var files: [String: Result<ELFFacts, BinaryError>] = [:]
  /// Exported function name → paths of host-compatible files exporting it.
  public private(set) var exporters: [String: [String]] = [:]
  /// Symbol name → paths of files that have it in `.dynsym` but cannot serve it (import,
  /// object, hidden, or a foreign architecture).
  public private(set) var unusable: [String: [String]] = [:]
  /// Directories that could not be listed.
  public private(set) var unlistable: [String: String] = [:]

  public init() {}

  /// Indexes every `*.so` (and `*.so.N…`) file directly inside `directories`, in sorted order.
  public static func build(directories: [String]) -> BinaryIndex {
    var index = BinaryIndex()
    for dir in directories {
      let names: [String]
      do { names = try FileManager.default.contentsOfDirectory(atPath: dir) } catch {
        index.unlistable[dir] = "cannot list directory"
        continue
      }
      for name in names.sorted() where isSharedObjectName(name) && !name.hasPrefix(".") {
        index.add((dir as NSString).appendingPathComponent(name))
      }
    }
    return index
  }

  static func isSharedObjectName(_ name: String) -> Bool {
    name.hasSuffix(".so") || name.contains(".so.")
  }

  /// Adds one file to the index.
  public mutating func add(_ path: String) {
    let result = ELFInspector.inspect(path)
    files[path] = result
    guard case .success(let facts) = result else { return }
    for sym in facts.dynamicSymbols {
      if sym.isExportedFunction && facts.matchesHost {
        exporters[sym.name, default: []].append(path)
      } else {
        unusable[sym.name, default: []].append(path)
      }
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
    for path in unusable[entryPoint] ?? [] {
      guard case .success(let facts) = files[path] else { continue }
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
      let found = "\(m.entryPoint) exported by \(facts.path) (\(facts.elfClass.rawValue) \(facts.machine))"
      guard !trustedKeys.isEmpty else { return .outcome(.pass, passDetail: found) }
      switch ModuleSignature.verify(facts.path, trusted: trustedKeys) {
      case .valid(let keyID): return .outcome(.pass, passDetail: "\(found); signed by trusted key \(keyID)")
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
