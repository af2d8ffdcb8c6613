import ForsettiCore
import ForsettiRuntime
import FoundationEssentials
import Glibc

/// `forsetti-host new`: a module project that builds with one command against an installed
/// Forsetti and runs under `forsetti-host dev` as it is.
enum NewCommand {
  static let spec = CommandSpec(
    name: "new",
    abstract: "Create a module project (C or Swift) that builds with one command and runs under the host.",
    discussion: """
      Writes DIR/manifests/NAME.json (a valid manifest whose entryPoint the code exports), the
      source, a README and, for C, a Makefile (`make`, `make dev`, `make lint`) or, for Swift, a
      Package.swift (`swift build`). NAME is the last part of the module ID. The project builds
      against the Forsetti installation in --prefix: forsetti.pc and forsetti.h for C, the Swift
      SDK in PREFIX/share/forsetti/ForsettiSDK for Swift. Make one with `scripts/install --prefix`.

      EXIT STATUS:
        0  the project was written
        2  usage error, DIR not empty, or no installation found
      """,
    options: [
      .value("id", "MODULE_ID", "The module ID, reverse-DNS style (com.vendor.thing)."),
      .value("lang", "c|swift", "The module's language.", default: "c"),
      .value("type", "service|ui|app", "The module type.", default: "service"),
      .value(
        "prefix", "DIR", "The Forsetti installation to build against.",
        default: "the one this forsetti-host was installed into"),
    ],
    positionals: [PositionalSpec("DIR", "The project directory to create (must not exist, or be empty).")])

  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    let dir = p.positionals[0]
    guard let id = p.value("id") else { throw .usage(.missingArgument("--id MODULE_ID")) }
    let language =
      try choice(p, "lang", ModuleTemplate.Language.allCases.map(\.rawValue), default: "c")
      .flatMap(ModuleTemplate.Language.init(rawValue:)) ?? .c
    let type =
      try choice(p, "type", ModuleType.allCases.map(\.rawValue), default: "service")
      .flatMap(ModuleType.init(rawValue:)) ?? .service
    var template = ModuleTemplate(language: language, moduleID: id, type: type, prefix: "")
    // The manifest the project starts with must pass the host's own decoder.
    if case .failure(let e) = ManifestDecoder.decode(bytes: Array(template.manifest.utf8)) {
      throw .usage(.invalidValue(option: "id", value: id, why: e.description))
    }
    template.prefix = try installation(p.value("prefix"), for: language)
    try prepare(dir)
    for file in template.files {
      let path = PathText.join(dir, file.path)
      do {
        try FileManager.default.createDirectory(
          atPath: PathText.parent(path), withIntermediateDirectories: true)
        try Data(file.content.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
      } catch {
        throw .configuration(
          .directory(option: "DIR", path: dir, reason: "cannot write \(file.path): \(error)"))
      }
    }
    let build = language == .c ? "make" : "swift build"
    console.out(
      """
      created \(language.rawValue) \(type.rawValue) module \(id) in \(dir):
      \(template.files.map { "  \($0.path)\n" }.joined())
      next:
        cd \(dir)
        \(build)
        \(template.runCommands)

      """)
    return .success
  }

  static func choice(_ p: ParsedArguments, _ option: String, _ allowed: [String], default d: String)
    throws(CommandFailure) -> String?
  {
    let v = p.value(option) ?? d
    guard allowed.contains(v) else {
      throw .usage(
        .invalidValue(option: option, value: v, why: "expected one of \(allowed.joined(separator: ", "))"))
    }
    return v
  }

  /// The installation prefix: the one given, or the one this executable lives in (PREFIX/bin).
  static func installation(_ given: String?, for language: ModuleTemplate.Language) throws(CommandFailure)
    -> String
  {
    let prefix: String
    if let given {
      prefix = URL(fileURLWithPath: given).standardizedFileURL.path
    } else {
      let exe =
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        ?? CommandLine.arguments[0]
      prefix = URL(fileURLWithPath: exe).deletingLastPathComponent().deletingLastPathComponent().path
    }
    let needed = language == .c ? "lib/pkgconfig/forsetti.pc" : "share/forsetti/ForsettiSDK/Package.swift"
    guard FileManager.default.fileExists(atPath: PathText.join(prefix, needed)) else {
      throw .configuration(.noInstallation(looked: prefix, missing: needed))
    }
    return prefix
  }

  /// Creates `dir`, or accepts it when it exists and is empty; never writes over files.
  static func prepare(_ dir: String) throws(CommandFailure) {
    var isDir = false
    if FileManager.default.fileExists(atPath: dir, isDirectory: &isDir) {
      guard isDir else {
        throw .configuration(.directory(option: "DIR", path: dir, reason: "exists and is not a directory"))
      }
      let entries = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
      guard entries.isEmpty else {
        throw .configuration(
          .directory(
            option: "DIR", path: dir, reason: "is not empty; new writes only into a new or empty directory"))
      }
      return
    }
    do { try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true) } catch {
      throw .configuration(.directory(option: "DIR", path: dir, reason: "cannot be created: \(error)"))
    }
  }
}
