import ForsettiCore
import ForsettiRuntime

/// `forsetti-host enable`, `disable` and `select`: the operator's activation state in
/// STATE/activation.json.
enum ActivationCommands {
  static let common: [OptionSpec] = [
    .value("manifests", "DIR", "Where the module's manifest is.", default: "manifests"),
    .state("State directory."),
    .flag("json", "Print the resulting activation state as JSON instead of text."),
  ]

  static let discussion = """
    STATE/activation.json holds the modules enabled and disabled by the operator and the selected
    UI module; it is written atomically, and concurrent commands never lose one another's change.
    With no file every eligible module is enabled (under the default policy, allow), and the
    first UI or app module by module ID is selected. Only one UI or app module runs at a time;
    services are not affected by the selection. `run --default-policy deny` runs a free module
    only when it is enabled here or forced on with `forsetti-host override module ID on` (a paid
    module runs once its product is unlocked). A running host applies a change at once.

    The module must be declared by a valid manifest in --manifests.

    EXIT STATUS:
      0  the state was changed (or already was so)
      2  usage error: a bad option, a module no manifest declares, or an unreadable or malformed
         activation file
    """

  static let enableSpec = CommandSpec(
    name: "enable",
    abstract: "Enable a module so that it runs when eligible, also under --default-policy deny.",
    discussion: discussion, options: common,
    positionals: [PositionalSpec("MODULE_ID", "The module to enable.")])

  static let disableSpec = CommandSpec(
    name: "disable", abstract: "Disable a module: it does not run even when eligible.",
    discussion: discussion, options: common,
    positionals: [PositionalSpec("MODULE_ID", "The module to disable.")])

  static let selectSpec = CommandSpec(
    name: "select", abstract: "Make a UI or app module the one that runs (enables it), or --none.",
    discussion: discussion,
    options: [.flag("none", "Select no UI module: every UI and app module stops.")] + common,
    positionals: [PositionalSpec("MODULE_ID", "The ui or app module to select.", optional: true)])

  static func enable(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    let m = try manifest(p.positionals[0], p)
    let state = try update(p) { $0.enable(m.moduleID) }
    return report(p, state, "enabled \(m.moduleID)", console)
  }

  static func disable(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    let m = try manifest(p.positionals[0], p)
    let state = try update(p) { $0.disable(m.moduleID) }
    return report(p, state, "disabled \(m.moduleID)", console)
  }

  static func select(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    switch (p.positionals.first, p.flag("none")) {
    case (nil, false):
      throw .usage(.missingArgument("MODULE_ID (or --none)"))
    case (let id?, true):
      throw .usage(.invalidValue(option: "none", value: id, why: "give a MODULE_ID or --none, not both"))
    case (nil, true):
      let state = try update(p) { $0.selectNone() }
      return report(p, state, "no UI module selected", console)
    case (let id?, false):
      let m = try manifest(id, p)
      guard m.moduleType.isVisual else {
        throw .configuration(
          .file(
            option: "manifests", path: manifestsDirectory(p),
            reason:
              "select is for ui and app modules; \(m.moduleID) is a \(m.moduleType.rawValue) module; enable it instead"
          ))
      }
      let state = try update(p) { $0.select(m.moduleID) }
      return report(p, state, "selected \(m.moduleID) as the UI module", console)
    }
  }

  static func manifestsDirectory(_ p: ParsedArguments) -> String { p.value("manifests") ?? "manifests" }

  /// The valid manifest declaring `id`, or a configuration error suggesting the closest ID.
  static func manifest(_ id: String, _ p: ParsedArguments) throws(CommandFailure) -> ModuleManifest {
    let dir = manifestsDirectory(p)
    let report: DiscoveryReport
    do { report = try ManifestDiscovery.discover(from: DirectoryManifestSource(root: dir)) } catch {
      throw .configuration(.manifests(error))
    }
    if let m = report.manifests.first(where: { $0.moduleID == id }) { return m }
    let hint =
      Suggestion.closest(to: id, among: report.manifests.map(\.moduleID)).map { "; did you mean '\($0)'?" }
      ?? ""
    throw .configuration(
      .file(option: "manifests", path: dir, reason: "no manifest declares module \(id)\(hint)"))
  }

  static func update(_ p: ParsedArguments, _ change: (inout ActivationState) -> Void) throws(CommandFailure)
    -> ActivationState
  {
    let store = ActivationStore(stateDirectory: p.stateDirectory)
    do { return try store.update(change) } catch {
      throw .configuration(.file(option: "state", path: error.path, reason: error.reason))
    }
  }

  static func report(_ p: ParsedArguments, _ state: ActivationState, _ line: String, _ console: Console)
    -> ExitCode
  {
    console.out(
      p.flag("json") ? JSONWriter.string(state.json) + "\n" : "\(line); a running host applies this at once\n"
    )
    return .success
  }
}
