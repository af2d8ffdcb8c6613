import ForsettiBinary
import ForsettiCore

/// `forsetti-host inspect FILE.so`: ELF facts, without loading the file.
enum InspectCommand {
  static let spec = CommandSpec(
    name: "inspect",
    abstract:
      "Show a module binary's ELF facts, exported functions and embedded manifest, without loading it.",
    discussion: """
      EXIT STATUS:
        0  the file is a shared object this host could load
        1  it is not (not ELF, truncated, another architecture, not a shared object)
        2  usage error
      """,
    options: [.flag("json", "Print JSON instead of text.")],
    positionals: [PositionalSpec("FILE", "The .so file to inspect.")])

  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    let path = p.positionals[0]
    switch ELFInspector.inspect(path) {
    case .failure(let e):
      if p.flag("json") {
        console.out(
          JSONWriter.string(
            .object(
              JSONObject([("file", .string(path)), ("valid", false), ("error", .string(e.description))])),
            pretty: true)
            + "\n")
      } else {
        console.out(ModuleText.visible("\(e)") + "\n")
      }
      return .blocked
    case .success(let f):
      let manifestText = f.embeddedManifest.map { String(decoding: $0, as: UTF8.self) }
      let embedded: JSONValue =
        manifestText.flatMap { try? JSONParser.parse($0) } ?? .string(orNull: manifestText)
      if p.flag("json") {
        let o = JSONObject([
          ("file", .string(path)), ("valid", true), ("size", .number(String(f.fileSize))),
          ("class", .string(f.elfClass.rawValue)), ("machine", .string(f.machine.description)),
          ("matchesHost", .bool(f.matchesHost)),
          ("exportedFunctions", .strings(f.exportedFunctions.sorted())),
          ("neededLibraries", .strings(f.neededLibraries)), ("embeddedManifest", embedded),
        ])
        console.out(JSONWriter.string(.object(o), pretty: true) + "\n")
      } else {
        // Every name here is the vendor's (the file, its symbols, its libraries, the embedded
        // manifest): shown through the module-text rule, the manifest line by line.
        let shown = ModuleText.visible
        var out = "\(shown(path)): \(f.elfClass.rawValue) \(f.machine) shared object, \(f.fileSize) bytes"
        out +=
          f.matchesHost
          ? "\n" : " (NOT loadable here: this host is \(ELFClass.host.rawValue) \(ELFMachine.host))\n"
        let functions = f.exportedFunctions.sorted().map(shown).joined(separator: ", ")
        out += "  exported functions (\(f.exportedFunctions.count)): \(functions)\n"
        out +=
          "  needs: \(f.neededLibraries.isEmpty ? "-" : f.neededLibraries.map(shown).joined(separator: ", "))\n"
        let manifestLines = manifestText.map {
          $0.split(separator: "\n", omittingEmptySubsequences: false).map { "\n" + shown(String($0)) }
            .joined()
        }
        out += "  embedded manifest (\(ELFInspector.manifestSection)): \(manifestLines ?? "none")\n"
        console.out(out)
      }
      return f.matchesHost ? .success : .blocked
    }
  }
}
