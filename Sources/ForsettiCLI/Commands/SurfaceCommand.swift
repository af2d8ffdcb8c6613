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
    render: ServedVerb.typed(render))

  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    try served.local(p, console)
  }

  /// The published surface, or that there is none.
  static func render(_ answer: SurfaceAnswer, _ p: ParsedArguments, _ console: Console) -> ExitCode {
    let state = p.stateDirectory
    guard let published = answer.published else {
      if p.flag("json") {
        ServedVerb.printJSON(answer.json, console)
      } else {
        console.out("no host has published a surface in \(state)\n")
      }
      return .blocked
    }
    if p.flag("json") {
      console.out(JSONWriter.string(answer.json, pretty: true) + "\n")
    } else {
      var out =
        answer.running
        ? "surface of the running host (pid \(published.pid))\n"
        : "last surface (pid \(published.pid), no longer running)\n"
      // Titles and IDs are the UI modules' text: each line shown by the module-text rule.
      func line(_ text: String) { out += LogRecord.streamSafe(text) + "\n" }
      for t in published.toolbarItems { line("  toolbar  \(t.itemID)  \"\(t.title)\"  from \(t.moduleID)") }
      for v in published.viewInjections {
        line("  view     \(v.viewID) in \(v.slotID) (priority \(v.priority))  from \(v.moduleID)")
      }
      for r in published.routes { line("  route    \(r)") }
      if let t = published.strippedThemeID { line("  theme mask \(t) validated and stripped") }
      console.out(out)
    }
    return answer.running ? .success : .blocked
  }
}
