import ForsettiBinary
import ForsettiCore
import ForsettiRuntime
import Glibc

/// What `pack` packs, found and judged as the host would: the manifest by the host's decoder
/// and consistency rules (discovery itself), the library by the host's ELF inspection and
/// entry-point lookup.
struct PackInputs: Sendable {
  var manifestPath: String
  var manifest: ModuleManifest
  var libraryPath: String
  var library: ELFFacts
  /// The detached signature to ship beside the library (`LIB.so.sig` by default), if any.
  var signaturePath: String?
  /// The vendor's public key to ship (never to trust), and the key itself.
  var publicKeyPath: String?
  var publicKey: [UInt8]?

  /// The library's file name, as installed.
  var libraryFileName: String { PathText.name(libraryPath) }

  /// What the command line asked for.
  struct Request: Sendable {
    var directory: String
    var manifest: String?
    var library: String?
    var signature: String?
    var publicKey: String?
  }

  /// Where `new`'s projects build their library, in the order pack looks: a C project's
  /// `build/`, a Swift project's release build, then its debug build.
  static let buildDirectories = ["build", ".build/release", ".build/debug"]

  static func resolve(_ r: Request) throws(PackError) -> PackInputs {
    let (manifestPath, manifest) = try self.manifest(r)
    let (libraryPath, facts) = try library(r, manifest)
    try checkLibrary(facts, path: libraryPath, entryPoint: manifest.entryPoint)
    var signature = r.signature
    if let given = signature {
      guard isFile(given) else { throw .file(option: "signature", path: given, reason: "no such file") }
    } else if exists(ModuleSignature.path(for: libraryPath)) {
      signature = ModuleSignature.path(for: libraryPath)
    }
    var key: [UInt8]?
    if let path = r.publicKey {
      do { key = try Signatures.readPublic(path) } catch {
        throw .file(
          option: "public-key", path: path,
          reason: "\(error); give the vendor's NAME.pub from `forsetti-host keygen`")
      }
    }
    return PackInputs(
      manifestPath: manifestPath, manifest: manifest, libraryPath: libraryPath, library: facts,
      signaturePath: signature, publicKeyPath: r.publicKey, publicKey: key)
  }

  /// The manifest named, or the one in DIR/manifests, judged by discovery as the host would.
  static func manifest(_ r: Request) throws(PackError) -> (String, ModuleManifest) {
    if let file = r.manifest {
      guard isFile(file) else { throw .file(option: "manifest", path: file, reason: "no such file") }
      let parent = PathText.parent(file)
      let source = OneManifestSource(directory: parent.isEmpty ? "." : parent, name: PathText.name(file))
      return (file, try judged(source, in: file, strict: true))
    }
    let dir = PathText.join(r.directory, "manifests")
    guard isDirectory(dir) else { throw .noManifest(directory: dir) }
    return try judgedOne(in: dir)
  }

  static func judgedOne(in dir: String) throws(PackError) -> (String, ModuleManifest) {
    let report: DiscoveryReport
    do { report = try ManifestDiscovery.discover(from: DirectoryManifestSource(root: dir)) } catch {
      throw .file(option: "manifest", path: dir, reason: error.description)
    }
    // JSON that is no manifest at all (no manifest key) is not counted, as the host skips it.
    let candidates = report.files.filter { $0.outcome != .ignored }
    guard let only = candidates.first else { throw .noManifest(directory: dir) }
    guard candidates.count == 1 else {
      throw .severalManifests(directory: dir, files: candidates.map(\.file))
    }
    let path = PathText.join(dir, only.file)
    switch only.outcome {
    case .manifest(let m): return (path, m)
    case .unreadable(let e): throw .file(option: "manifest", path: path, reason: e.description)
    default: throw .manifestInvalid(file: path, detail: only.outcome.detail)
    }
  }

  static func judged(_ source: OneManifestSource, in path: String, strict: Bool) throws(PackError)
    -> ModuleManifest
  {
    let report: DiscoveryReport
    do { report = try ManifestDiscovery.discover(from: source, mode: .strict) } catch {
      throw .file(option: "manifest", path: path, reason: error.description)
    }
    guard let file = report.files.first else {
      throw .file(option: "manifest", path: path, reason: "cannot be read")
    }
    switch file.outcome {
    case .manifest(let m): return m
    case .unreadable(let e): throw .file(option: "manifest", path: path, reason: e.description)
    default: throw .manifestInvalid(file: path, detail: file.outcome.detail)
    }
  }

  /// The library named, or the one the host would find for the manifest's entry point in the
  /// project's build directories (the first that has one).
  static func library(_ r: Request, _ m: ModuleManifest) throws(PackError) -> (String, ELFFacts) {
    if let file = r.library {
      guard isFile(file) else { throw .file(option: "library", path: file, reason: "no such file") }
      switch ELFInspector.inspect(file) {
      case .success(let facts): return (file, facts)
      case .failure(let e):
        throw .libraryRefused(
          path: file, detail: e.description, fix: "rebuild it as a shared object (-shared -fPIC)")
      }
    }
    let looked = buildDirectories.map { PathText.join(r.directory, $0) }.filter(isDirectory)
    var notes: [String] = []
    for dir in looked {
      switch BinaryIndex.build(directories: [dir]).locate(entryPoint: m.entryPoint) {
      case .success(let facts): return (facts.path, facts)
      case .failure(let v) where v.reason == .binaryNotFound: continue
      case .failure(let v) where v.reason == .invalidBinary: notes.append(v.detail)
      case .failure(let v):
        throw .libraryRefused(path: dir, detail: v.detail, fix: "fix the library (or pass --library FILE.so)")
      }
    }
    throw .noLibrary(entryPoint: m.entryPoint, looked: looked, detail: notes.joined(separator: "; "))
  }

  /// What the host checks of a library before loading it, and its name in a plugin directory.
  static func checkLibrary(_ facts: ELFFacts, path: String, entryPoint: String) throws(PackError) {
    let name = PathText.name(path)
    guard BinaryIndex.isSharedObjectName(name), !name.hasPrefix(".") else {
      throw .libraryRefused(
        path: path,
        detail: "the host loads only files named NAME.so (or NAME.so.N) from its plugin directory",
        fix: "rename it, e.g. lib\(name).so")
    }
    guard !facts.exportedFunctions.contains(entryPoint) else { return }
    if let problem = facts.symbolTable.entryPointProblem(named: entryPoint) {
      throw .libraryRefused(
        path: path, detail: "\(entryPoint) (the manifest's entryPoint) cannot be called: \(problem.reason)",
        fix: problem.fix)
    }
    throw .libraryRefused(
      path: path, detail: "it does not export \(entryPoint), the manifest's entryPoint",
      fix:
        "export it (C: __attribute__((visibility(\"default\"))); Swift: @_cdecl(\"\(entryPoint)\") public func), or correct the manifest's entryPoint"
    )
  }

  static func exists(_ path: String) -> Bool {
    var st = stat()
    return lstat(path, &st) == 0
  }

  static func isFile(_ path: String) -> Bool {
    var st = stat()
    return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
  }

  static func isDirectory(_ path: String) -> Bool {
    var st = stat()
    return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
  }
}

/// One manifest file as a discovery source, so a file named with --manifest is judged by
/// discovery itself: the host's decoder and its consistency rules, never a second parser.
struct OneManifestSource: ManifestSource {
  var directory: String
  var name: String

  func candidateFiles() throws(ManifestSourceError) -> [String] { [name] }

  func read(_ relativePath: String, limit: Int) throws(ManifestSourceError) -> [UInt8] {
    try DirectoryManifestSource(root: directory).read(relativePath, limit: limit)
  }
}
