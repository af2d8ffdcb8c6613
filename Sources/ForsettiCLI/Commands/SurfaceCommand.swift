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

  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    let state = p.stateDirectory
    guard
      let value = try HostOptions.readJSON(
        RuntimeStateFile.surfacePath(state), option: "state", missingOK: true),
      case .object(var o) = value
    else {
      if p.flag("json") {
        console.out(
          JSONWriter.string(.object(JSONObject([("running", false), ("surface", .null)])), pretty: true)
            + "\n")
      } else {
        console.out("no host has published a surface in \(state)\n")
      }
      return .blocked
    }
    let pid = o["pid"]?.integerValue.map(Int32.init) ?? 0
    let alive = RuntimeStateFile.isAlive(pid)
    o["running"] = .bool(alive)
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
