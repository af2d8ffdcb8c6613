import ForsettiCore
import ForsettiRuntime

/// `forsetti-host surface`: the UI surface published by the running host.
enum SurfaceCommand {
  static let spec = CommandSpec(
    name: "surface",
    abstract: "Print the UI surface (toolbar items, views, overlay routes) the running host published.",
    discussion: """
      Reads STATE/surface.json, written by `forsetti-host run` whenever the surface changes. Theme
      masks are validated and then stripped before publication: the host owns shell styling.

      EXIT STATUS:
        0  a running host published this surface
        1  no host is running (the last published surface, if any, is printed)
        2  usage error
      """,
    options: [
      .state("State directory of the host."),
      .flag("json", "Print JSON instead of text."),
    ])

  static let served = ServedVerb(
    command: { _ throws(CommandFailure) in .surface },
    judge: { p throws(CommandFailure) in ServedVerb.files(p) },
    render: render)

  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    try served.local(p, console)
  }

  /// The published surface, or that there is none.
  static func render(_ answer: JSONValue, _ p: ParsedArguments, _ console: Console) -> ExitCode {
    let state = p.stateDirectory
    guard let o = answer.objectValue, o["pid"] != nil else {
      if p.flag("json") {
        ServedVerb.printJSON(answer, console)
      } else {
        console.out("no host has published a surface in \(state)\n")
      }
      return .blocked
    }
    let pid = o["pid"]?.integerValue ?? 0
    let alive = o["running"]?.boolValue ?? false
    if p.flag("json") {
      console.out(JSONWriter.string(.object(o), pretty: true) + "\n")
    } else {
      var out =
        alive
        ? "surface of the running host (pid \(pid))\n" : "last surface (pid \(pid), no longer running)\n"
      // Titles and IDs are the UI modules' text: each line shown by the module-text rule.
      func line(_ text: String) { out += LogRecord.streamSafe(text) + "\n" }
      for case .object(let t) in o["toolbarItems"]?.arrayValue ?? [] {
        line(
          "  toolbar  \(t["itemID"]?.stringValue ?? "?")  \"\(t["title"]?.stringValue ?? "")\"  from \(t["moduleID"]?.stringValue ?? "?")"
        )
      }
      for case .object(let v) in o["viewInjections"]?.arrayValue ?? [] {
        line(
          "  view     \(v["viewID"]?.stringValue ?? "?") in \(v["slotID"]?.stringValue ?? "?") (priority \(v["priority"].map { JSONWriter.string($0) } ?? "0"))  from \(v["moduleID"]?.stringValue ?? "?")"
        )
      }
      for r in o["overlay"]?.objectValue?["routes"]?.arrayValue ?? [] {
        line("  route    \(r.stringValue ?? "?")")
      }
      if let t = o["strippedThemeID"]?.stringValue { line("  theme mask \(t) validated and stripped") }
      console.out(out)
    }
    return alive ? .success : .blocked
  }
}
