import ForsettiBinary
import ForsettiCore
import ForsettiRuntime
import Glibc

/// `forsetti-host pack`: a module project as a Debian package, which a customer installs with
/// `apt install ./PACKAGE.deb` into the packaged host's system directories.
enum PackCommand {
  static let layout = SystemLayout.debian

  static let spec = CommandSpec(
    name: "pack",
    abstract: "Make a Debian package of a module project, to install with `apt install ./PACKAGE.deb`.",
    discussion: """
      The package installs the module into the packaged host's system directories: its binary as
      \(layout.plugins)/MODULE_ID.so (the module ID is unique; the file name of the build need
      not be), its detached signature (if any) beside it as MODULE_ID.so.sig, its
      manifest as \(layout.manifests)/MODULE_ID.json and, with --public-key, the vendor's key as
      \(layout.vendorKeys)/MODULE_ID.pub. Installing the package trusts nothing and approves
      nothing: an operator trusts the key with `forsetti-host trust
      \(layout.vendorKeys)/MODULE_ID.pub --for modules` (or --for licences), and the host still
      asks for approval of the capabilities the manifest requests. The binary is copied byte for
      byte (never stripped: the signature covers its exact bytes).

      The manifest is judged by the host's own rules and the library by its ELF inspection (the
      manifest's entryPoint must be exported), as `forsetti-host check` would. The package is
      named after the module ID (lowercased; characters Debian does not allow become -), its
      version is the manifest's moduleVersion with Debian revision 1 (a prerelease 1.2.0-rc.1
      becomes 1.2.0~rc.1, which sorts before 1.2.0), and its architecture is the library's (from
      its ELF header, not this machine's). Depends names the packages of the libraries the module
      needs (dpkg-shlibdeps) and forsetti-host (>= the manifest's minForsettiVersion). A library no
      Debian package installs is refused: build a Swift module with the Swift runtime linked in,
      `swift build -c release -Xswiftc -static-stdlib`. With --glibc or --target the library (and
      the libraries it ships) must load on that system: every symbol version it needs no newer
      than the baseline's, every library it needs in the baseline's base set or shipped beside
      it; Depends then holds what dpkg-shlibdeps computes from those versions. The package holds
      no maintainer scripts.
      Needs dpkg-deb and dpkg-shlibdeps (apt-get install dpkg-dev).

      --json prints {"deb","package","version","arch","depends","files":[{"path","mode","size"}],
      "maintainer","signature"}: the .deb's path, the control fields, each installed file with its
      mode (octal text) and size, and what the signature check found (null when unsigned).

      EXIT STATUS:
        0  the package was written
        1  the module is refused: its manifest, its library, or a library it needs
        2  usage error: a bad option, a missing file, no maintainer, or dpkg-dev not installed
      """,
    options: [
      .value("manifest", "FILE", "The module's manifest.", default: "the one manifest in DIR/manifests"),
      .value(
        "library", "FILE.so", "The module's binary.",
        default:
          "the .so exporting the manifest's entryPoint in DIR/build, DIR/.build/release or DIR/.build/debug"),
      .value(
        "signature", "FILE", "Its detached signature (forsetti-host sign), installed as MODULE_ID.so.sig.",
        default: "LIB.so.sig beside the library, when there is one"),
      .value(
        "public-key", "FILE",
        "The vendor's public key (NAME.pub) to ship, untrusted; a signature by it is checked."),
      .value("out", "DIR", "Where to write the .deb.", default: "the current directory"),
      .value(
        "glibc", "X.Y",
        "The oldest glibc the package is for: a library reaching past it (a newer symbol version, a library outside the base set) is refused, as `lint --glibc` reports it."
      ),
      .value("target", "NAME", "A named baseline instead of --glibc (as `lint --target`)."),
      .value(
        "maintainer", "NAME", "Who made the package, \"Name <address>\".",
        default: "\"$DEBFULLNAME <$DEBEMAIL>\""),
      .flag("json", "Print what was packed as JSON."),
    ],
    positionals: [
      PositionalSpec(
        "DIR", "The module project (from `forsetti-host new`); default: the current directory.",
        optional: true)
    ])

  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    do {
      return try pack(p, console: console, tools: SpawnedTools())
    } catch {
      console.err("\(ForsettiHostCLI.program): error: \(error)\n")
      if let fix = error.fix { console.err("hint: \(fix)\n") }
      return error.exitCode
    }
  }

  static func pack(_ p: ParsedArguments, console: Console, tools: any ToolRunner) throws(PackError)
    -> ExitCode
  {
    let builder = DebianPackageBuilder(tools: tools)
    // Before anything is judged: without dpkg-dev there is nothing pack can do.
    try builder.checkTools()
    let maintainer = try Maintainer.resolve(given: p.value("maintainer"), environment: environment()).get()
    let inputs = try PackInputs.resolve(
      .init(
        directory: p.positionals.first ?? ".", manifest: p.value("manifest"), library: p.value("library"),
        signature: p.value("signature"), publicKey: p.value("public-key")))
    if let baseline = try baseline(p) {
      let resolution = LibraryFactsCache.shared.resolver().resolve(
        inputs.library, path: inputs.libraryPath)
      let findings = baseline.findings(inputs.library, path: inputs.libraryPath, resolution)
      if !findings.isEmpty {
        throw .libraryRefused(
          path: inputs.libraryPath, detail: findings.map(\.description).joined(separator: "; "),
          fix: "build it on \(baseline.name) or an older system (a container of it will do), then pack again")
      }
    }
    let plan = try PackagePlan.make(inputs, maintainer: maintainer, date: now(), layout: layout)
    let built = try builder.build(plan, inputs, into: p.value("out") ?? ".")
    if p.flag("json") {
      console.out(JSONWriter.string(json(built), pretty: true) + "\n")
    } else {
      console.out(text(built, inputs))
    }
    return .success
  }

  /// The baseline of `--glibc` or `--target` (`LintCommand.baseline`'s rule), nil without either.
  static func baseline(_ p: ParsedArguments) throws(PackError) -> BinaryBaseline? {
    do throws(CommandFailure) {
      return try LintCommand.baseline(p)
    } catch {
      let option = p.value("glibc") != nil ? "glibc" : "target"
      throw .file(option: option, path: p.value(option) ?? "", reason: "\(error)")
    }
  }

  static func json(_ b: DebianPackageBuilder.Built) -> JSONValue {
    let files = b.files.map { f in
      JSONValue.object(
        JSONObject([
          ("path", .string(f.path)), ("mode", .string(octal(f.mode))), ("size", .number(String(f.size))),
        ]))
    }
    return .object(
      JSONObject([
        ("deb", .string(b.deb)), ("package", .string(b.control.package)),
        ("version", .string(b.control.version)),
        ("arch", .string(b.control.architecture)), ("depends", .strings(b.control.depends)),
        ("files", .array(files)), ("maintainer", .string(b.control.maintainer)),
        ("signature", .string(orNull: b.signature)),
      ]))
  }

  static func text(_ b: DebianPackageBuilder.Built, _ inputs: PackInputs) -> String {
    let c = b.control
    var out = "packed \(inputs.manifest.moduleID) \(inputs.manifest.moduleVersion) into \(b.deb)\n"
    out += "  package  \(c.package) \(c.version) \(c.architecture)\n"
    out += "  depends  \(c.depends.joined(separator: ", "))\n"
    for f in b.files { out += "  \(octal(f.mode))     \(f.path)\n" }
    if let s = b.signature { out += "  \(s)\n" }
    let local = b.deb.hasPrefix("/") || b.deb.hasPrefix("./") ? b.deb : "./" + b.deb
    out += "install: apt install \(local)\n"
    if inputs.publicKeyPath != nil {
      out +=
        "the vendor key is shipped, not trusted: forsetti-host trust \(layout.vendorKey(moduleID: inputs.manifest.moduleID)) --for modules\n"
    }
    return out
  }

  static func octal(_ mode: UInt16) -> String {
    let digits = String(mode, radix: 8)
    return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
  }

  static func environment() -> [String: String] {
    var out: [String: String] = [:]
    for name in ["DEBFULLNAME", "DEBEMAIL"] {
      if let v = getenv(name) { out[name] = String(cString: v) }
    }
    return out
  }

  /// SOURCE_DATE_EPOCH when set (reproducible builds), else now.
  static func now() -> Int {
    if let v = getenv("SOURCE_DATE_EPOCH").flatMap({ Int(String(cString: $0)) }) { return v }
    return Int(time(nil))
  }
}
