/// How discovery treats files that are not valid manifests.
public enum DiscoveryMode: String, Sendable, Hashable {
  /// Skip JSON without any manifest root key; report invalid files and carry on.
  case fallback
  /// Stop at the first file that is not a valid, unique manifest.
  case strict
}

/// What discovery made of one file.
public enum DiscoveryOutcome: Sendable, Hashable {
  case manifest(ModuleManifest)
  /// Not a manifest (fallback mode only): no manifest root key.
  case ignored
  case invalid(ManifestLoadError)
  /// A second manifest for an already discovered ID; `firstFile` holds the one that counts.
  case duplicate(moduleID: String, firstFile: String)
  case unreadable(ManifestSourceError)

  /// The reason code when the file is rejected.
  public var reason: ReasonCode? {
    switch self {
    case .manifest, .ignored: nil
    case .invalid(let e): e.reason
    case .duplicate: .duplicateModuleID
    case .unreadable: .validationFailed
    }
  }

  public var detail: String {
    switch self {
    case .manifest(let m): "manifest for \(m.moduleID) \(m.moduleVersion)"
    case .ignored: "not a manifest (no manifest root keys); ignored"
    case .invalid(let e): e.description
    case .duplicate(let id, let first): "moduleID \(id) is already declared by \(first)"
    case .unreadable(let e): e.description
    }
  }
}

/// One discovered file.
public struct DiscoveredFile: Sendable, Hashable {
  /// The path relative to the manifest directory.
  public var file: String
  public var outcome: DiscoveryOutcome

  /// The module ID, when the file declared one (even an invalid or duplicate manifest).
  public var moduleID: String?
}

/// The result of scanning a manifest directory.
public struct DiscoveryReport: Sendable, Hashable {
  /// Every candidate file in sorted order (in strict mode, up to the first failure).
  public var files: [DiscoveredFile]
  /// In strict mode, the file that stopped discovery.
  public var strictFailure: DiscoveredFile?

  /// The valid, unique manifests, in file order.
  public var manifests: [ModuleManifest] {
    files.compactMap { if case .manifest(let m) = $0.outcome { return m } else { return nil } }
  }
}

/// Discovery: reads every candidate in a stable, sorted order, so the result (and which of two
/// duplicates wins) never depends on the file system's listing order.
public enum ManifestDiscovery {
  /// Manifests are small; anything larger is refused before parsing.
  public static let maxManifestBytes = 1 << 20

  public static func discover(from source: any ManifestSource, mode: DiscoveryMode = .fallback)
    throws(ManifestSourceError) -> DiscoveryReport
  {
    let paths = try source.candidateFiles().sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    var files: [DiscoveredFile] = []
    var firstFileByID: [String: String] = [:]
    for path in paths {
      let entry = judge(path, source: source, mode: mode, seen: firstFileByID)
      if case .manifest(let m) = entry.outcome { firstFileByID[m.moduleID] = path }
      files.append(entry)
      if mode == .strict, entry.outcome.reason != nil {
        return DiscoveryReport(files: files, strictFailure: entry)
      }
    }
    return DiscoveryReport(files: files, strictFailure: nil)
  }

  static func judge(_ path: String, source: any ManifestSource, mode: DiscoveryMode, seen: [String: String])
    -> DiscoveredFile
  {
    let bytes: [UInt8]
    do { bytes = try source.read(path, limit: maxManifestBytes) } catch {
      return DiscoveredFile(file: path, outcome: .unreadable(error))
    }
    let value: JSONValue
    do { value = try JSONParser.parse(bytes) } catch {
      return DiscoveredFile(file: path, outcome: .invalid(.invalidJSON(error)))
    }
    let declaredID = value.objectValue?["moduleID"]?.stringValue
    if !ManifestDecoder.looksLikeManifest(value) {
      if mode == .fallback { return DiscoveredFile(file: path, outcome: .ignored) }
      let issue = ManifestIssue(
        field: "(root)", problem: .notAllowed("not a manifest: none of the manifest root keys is present"))
      return DiscoveredFile(file: path, outcome: .invalid(.invalid(.init(issues: [issue]))))
    }
    switch ManifestDecoder.decode(value) {
    case .failure(let e):
      return DiscoveredFile(file: path, outcome: .invalid(.invalid(e)), moduleID: declaredID)
    case .success(let m):
      if let first = seen[m.moduleID] {
        return DiscoveredFile(
          file: path, outcome: .duplicate(moduleID: m.moduleID, firstFile: first), moduleID: m.moduleID)
      }
      return DiscoveredFile(file: path, outcome: .manifest(m), moduleID: m.moduleID)
    }
  }
}
