/// Why `forsetti-host pack` made no package: what was wrong, where, and what to do. A module
/// refused for what it is (its manifest, its binary, what it links) exits 1, as `lint` and
/// `check` do for a blocked module; a missing file, tool or setting exits 2.
enum PackError: Error, Sendable, Equatable, CustomStringConvertible {
  /// DIR/manifests has no manifest (or does not exist).
  case noManifest(directory: String)
  /// DIR/manifests has more than one: which one to pack is not for pack to guess.
  case severalManifests(directory: String, files: [String])
  /// The host's own decoder and consistency rules refuse the manifest.
  case manifestInvalid(file: String, detail: String)
  /// A file named on the command line (or its default) is missing or unreadable.
  case file(option: String, path: String, reason: String)
  /// No built library exports the manifest's entry point where the project builds one.
  case noLibrary(entryPoint: String, looked: [String], detail: String)
  /// The host's ELF inspection refuses the library, or it does not export the entry point.
  case libraryRefused(path: String, detail: String, fix: String)
  /// The ELF machine has no Debian architecture pack knows.
  case architecture(path: String, machine: String)
  /// The module ID cannot be made a Debian package name.
  case packageName(moduleID: String, why: String)
  /// The library needs a library no Debian package provides.
  case unpackagedLibrary(library: String, foundAt: String?, module: String, swift: Bool)
  /// The detached signature does not fit the library.
  case signature(path: String, detail: String)
  /// dpkg-deb or dpkg-shlibdeps is missing.
  case missingTools([String])
  /// No --maintainer, DEBFULLNAME/DEBEMAIL, or not of the form `Name <address>`.
  case maintainer(given: String?, source: String)
  /// An external tool failed where it should not have.
  case tool(name: String, status: Int32, output: String)
  /// The output directory or the staging area cannot be written.
  case output(path: String, reason: String)

  var exitCode: ExitCode {
    switch self {
    case .manifestInvalid, .libraryRefused, .architecture, .packageName, .unpackagedLibrary, .signature,
      .tool:
      .blocked
    case .noManifest, .severalManifests, .file, .noLibrary, .missingTools, .maintainer, .output:
      .usage
    }
  }

  var description: String {
    switch self {
    case .noManifest(let dir):
      "no manifest in \(dir) (a project from `forsetti-host new` has one in DIR/manifests)"
    case .severalManifests(let dir, let files):
      "\(dir) has \(files.count) manifests (\(files.joined(separator: ", "))); a package holds one module"
    case .manifestInvalid(let file, let detail): "\(file): the host refuses this manifest: \(detail)"
    case .file(let option, let path, let reason): "--\(option) \(path): \(reason)"
    case .noLibrary(let entry, let looked, let detail):
      "no built library exports \(entry) (the manifest's entryPoint) in \(looked.isEmpty ? "the project (no build directory)" : looked.joined(separator: ", "))\(detail.isEmpty ? "" : ": " + detail)"
    case .libraryRefused(let path, let detail, _): "\(path): the host would refuse this library: \(detail)"
    case .architecture(let path, let machine):
      "\(path) is built for \(machine), which has no Debian architecture pack knows (amd64, arm64, i386, armhf, riscv64, s390x)"
    case .packageName(let id, let why): "module ID \(id) cannot be a Debian package name: \(why)"
    case .unpackagedLibrary(let lib, let at, let module, _):
      "\(module) needs \(lib)\(at.map { " (found at \($0))" } ?? ""), which no Debian package installs: where the module is installed, it cannot be loaded"
    case .signature(let path, let detail): "\(path): \(detail)"
    case .missingTools(let tools):
      "pack needs \(tools.joined(separator: " and ")), which \(tools.count == 1 ? "is" : "are") not installed"
    case .maintainer(let given?, let source):
      "maintainer \"\(given)\" (from \(source)) is not of the form \"Name <address@domain>\""
    case .maintainer(nil, _):
      "no maintainer: a package names who made it"
    case .tool(let name, let status, let output):
      "\(name) failed (status \(status))\(output.isEmpty ? "" : ":\n" + output)"
    case .output(let path, let reason): "\(path): \(reason)"
    }
  }

  /// What to do about it.
  var fix: String? {
    switch self {
    case .noManifest: "pass --manifest FILE, or run pack in (or on) the project directory"
    case .severalManifests: "pass --manifest FILE to say which one to pack"
    case .manifestInvalid(let file, _): "fix it (`forsetti-host lint \(file)` says more), then pack again"
    case .file: nil
    case .noLibrary:
      "build the project first (C: `make`; Swift: `swift build -c release -Xswiftc -static-stdlib`), or pass --library FILE.so"
    case .libraryRefused(_, _, let fix): fix
    case .architecture: "build the module for one of these"
    case .packageName: "give the module a reverse-DNS ID that starts with a letter (com.vendor.thing)"
    case .unpackagedLibrary(_, _, _, let swift):
      swift
        ? "build the module with the Swift runtime linked in: `swift build -c release -Xswiftc -static-stdlib`; the .so then needs only libc, libm, libstdc++ and libgcc_s, which Debian packages"
        : "link that library statically into the module, or package it and depend on that package"
    case .signature: "sign the library as it is now: `forsetti-host sign FILE.so --key VENDOR.key`"
    case .missingTools: "apt-get install dpkg-dev"
    case .maintainer:
      "pass --maintainer \"Your Name <you@example.com>\", or set DEBFULLNAME and DEBEMAIL"
    case .tool: nil
    case .output: "pass --out DIR, a directory you can write"
    }
  }
}
