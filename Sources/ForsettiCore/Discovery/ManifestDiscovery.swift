import Glibc

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
    let paths = sortedBytewise(try source.candidateFiles())
    let pass = source.openPass()
    // Each file is read and decoded on its own (in parallel when there are many); which of two
    // manifests with one ID wins, and where strict mode stops, is decided after, in path order.
    // Decided in place: copying each entry into a second array retained every manifest again.
    var files = ParallelMap.map(paths.count) { judge(paths[$0], source: pass, mode: mode) }
    var firstFileByID: [String: String] = [:]
    firstFileByID.reserveCapacity(files.count)
    for i in files.indices {
      // A manifest's entry carries its module ID (`checked`), so the manifest is not copied out.
      if case .manifest = files[i].outcome, let id = files[i].moduleID {
        if let first = firstFileByID[id] {
          files[i].outcome = .duplicate(moduleID: id, firstFile: first)
        } else {
          firstFileByID[id] = files[i].file
        }
      }
      if mode == .strict, files[i].outcome.reason != nil {
        files.removeSubrange((i + 1)...)
        return DiscoveryReport(files: files, strictFailure: files[i])
      }
    }
    return DiscoveryReport(files: files, strictFailure: nil)
  }

  /// `paths` in byte-wise order of their UTF-8. Every path's bytes are copied once into one
  /// buffer and compared there with `memcmp`: comparing the strings' `utf8` views was a tenth
  /// of discovery, a byte array per path an allocation each, and String's own order (Unicode's,
  /// not the bytes') about 300 instructions a comparison.
  static func sortedBytewise(_ paths: [String]) -> [String] {
    var bytes: [UInt8] = []
    var spans: [Range<Int>] = []
    bytes.reserveCapacity(paths.count * 32)
    spans.reserveCapacity(paths.count)
    for path in paths {
      let start = bytes.count
      bytes.append(contentsOf: path.utf8)
      spans.append(start..<bytes.count)
    }
    return bytes.withUnsafeBufferPointer { all in
      guard let base = all.baseAddress else { return paths }
      let order = paths.indices.sorted { i, j in
        let (a, b) = (spans[i], spans[j])
        let common = min(a.count, b.count)
        if common > 0 {
          let c = memcmp(base + a.lowerBound, base + b.lowerBound, common)
          if c != 0 { return c < 0 }
        }
        return a.count < b.count
      }
      return order.map { paths[$0] }
    }
  }

  /// One file on its own: read, parse, decode, check. Duplicates are found by the caller.
  static func judge(_ path: String, source: any ManifestSource, mode: DiscoveryMode) -> DiscoveredFile {
    let bytes: [UInt8]
    do { bytes = try source.read(path, limit: maxManifestBytes) } catch {
      return DiscoveredFile(file: path, outcome: .unreadable(error))
    }
    return judge(bytes: bytes, file: path, mode: mode)
  }

  /// The verdict on one file's bytes. `fastPath: false` skips `ManifestFastPath`, so the
  /// manifest fuzzer can check that the verdict never depends on which decoder answered.
  static func judge(bytes: [UInt8], file path: String, mode: DiscoveryMode, fastPath: Bool = true)
    -> DiscoveredFile
  {
    if fastPath, let m = ManifestFastPath.decode(bytes) { return checked(m, file: path) }
    let value: JSONValue
    do { value = try JSONParser.parse(bytes) } catch {
      return DiscoveredFile(file: path, outcome: .invalid(.invalidJSON(error)))
    }
    // Shown (never used to find anything) when the manifest is refused: by the module-text rule.
    let declaredID = value.objectValue?["moduleID"]?.stringValue.map(ModuleText.visible)
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
      return checked(m, file: path)
    }
  }

  /// A decoded manifest whose fields disagree (a role for another module type, an I/O without
  /// its capability) is refused here, as upstream's loader does, so it never counts as a
  /// provider and every view of the host reports it as `validationFailed` with its module ID.
  static func checked(_ m: ModuleManifest, file: String) -> DiscoveredFile {
    let issues = ManifestConsistency.issues(m)
    guard issues.isEmpty else {
      return DiscoveredFile(
        file: file, outcome: .invalid(.invalid(.init(issues: issues))), moduleID: m.moduleID)
    }
    return DiscoveredFile(file: file, outcome: .manifest(m), moduleID: m.moduleID)
  }
}
