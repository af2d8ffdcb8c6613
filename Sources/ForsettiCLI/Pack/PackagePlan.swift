import ForsettiBinary
import ForsettiCore

/// What a module's package holds and says, decided from the inputs before anything is written:
/// names, version, architecture, every file with its place and mode. Pure; the builder stages
/// it, asks dpkg-shlibdeps for the rest of Depends and builds the `.deb`.
struct PackagePlan: Sendable, Equatable {
  struct Entry: Sendable, Equatable {
    enum Content: Sendable, Equatable {
      /// The file's exact bytes: the library, its signature, the manifest, the key.
      case copy(from: String)
      case text(String)
      /// Written, then `gzip -9n` (the path ends in `.gz`).
      case gzipped(String)
    }
    /// Absolute, in the installed system.
    var path: String
    var content: Content
    /// 0644 for every file: Debian Policy 10.9 (a shared library is not executable, 8.1).
    var mode: UInt16 = 0o644
  }

  var package: String
  var version: String
  var architecture: String
  var maintainer: String
  /// What Depends has before dpkg-shlibdeps adds the libraries' packages.
  var hostDepends: String
  var synopsis: String
  var paragraphs: [String]
  /// The library, as installed.
  var library: String
  var entries: [Entry]

  static func make(
    _ inputs: PackInputs, maintainer: String, date seconds: Int, layout: SystemLayout = .debian
  ) throws(PackError) -> PackagePlan {
    let m = inputs.manifest
    let package = try DebianPackageName.from(moduleID: m.moduleID).get()
    guard let arch = DebianArchitecture.of(inputs.library.elfClass, inputs.library.machine) else {
      throw .architecture(
        path: inputs.libraryPath, machine: "\(inputs.library.elfClass.rawValue) \(inputs.library.machine)")
    }
    let version = DebianVersion.package(m.moduleVersion)
    // Named after the module ID, not the build's file name: two vendors' libweather.so would
    // be the same path, and dpkg refuses the second package. The host finds a module's library
    // by the entry point it exports, whatever the file is called.
    let library = layout.plugin(m.moduleID + ".so")
    var entries = [Entry(path: library, content: .copy(from: inputs.libraryPath))]
    if let sig = inputs.signaturePath {
      entries.append(Entry(path: ModuleSignature.path(for: library), content: .copy(from: sig)))
    }
    entries.append(
      Entry(path: layout.manifest(moduleID: m.moduleID), content: .copy(from: inputs.manifestPath)))
    if let key = inputs.publicKeyPath {
      entries.append(Entry(path: layout.vendorKey(moduleID: m.moduleID), content: .copy(from: key)))
    }
    let doc = "/usr/share/doc/\(package)"
    entries += [
      Entry(
        path: doc + "/copyright",
        content: .text(
          PackageDocuments.copyright(
            moduleID: m.moduleID, maintainer: maintainer, year: PackageDocuments.year(seconds)))),
      Entry(
        path: doc + "/changelog.Debian.gz",
        content: .gzipped(
          PackageDocuments.changelog(
            package: package, version: version, moduleVersion: m.moduleVersion.description,
            maintainer: maintainer, date: PackageDocuments.rfc2822(seconds)))),
      Entry(
        path: "/usr/share/lintian/overrides/\(package)",
        content: .text(
          PackageDocuments.lintianOverrides(
            package: package, library: library, unstripped: inputs.library.hasSymbolTable,
            needsNothing: inputs.library.neededLibraries.isEmpty))),
    ]
    let (synopsis, paragraphs) = DebianControl.description(
      of: m, layout: layout, shipsKey: inputs.publicKeyPath != nil)
    return PackagePlan(
      package: package, version: version, architecture: arch, maintainer: maintainer,
      hostDepends: "forsetti-host (>= \(DebianVersion.upstream(m.minForsettiVersion)))", synopsis: synopsis,
      paragraphs: paragraphs, library: library, entries: entries)
  }

  /// `PACKAGE_VERSION_ARCH.deb`, as dpkg names it.
  var debName: String { "\(package)_\(version)_\(architecture).deb" }

  /// The control file, once dpkg-shlibdeps has named the libraries' packages. No upper bound on
  /// forsetti-host: the host judges maxForsettiVersion itself and says why, where an upper
  /// bound would have apt remove the module to upgrade the host.
  func control(libraryDepends: [String], installedSizeKiB: Int) -> DebianControl {
    DebianControl(
      package: package, version: version, architecture: architecture, maintainer: maintainer,
      installedSizeKiB: installedSizeKiB, depends: libraryDepends + [hostDepends], synopsis: synopsis,
      paragraphs: paragraphs)
  }
}
