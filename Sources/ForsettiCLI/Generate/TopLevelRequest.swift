import ForsettiCore

/// What the options given instead of a verb ask for (`forsetti-host --version --json`).
enum TopLevelRequest: Equatable, Sendable {
  case help
  case version(json: Bool)
  case completionScript(CompletionShell)
  /// The manual pages: into a directory, or the overview page on standard output.
  case manual(directory: String?)

  /// Reads `args` against the top-level `options`: one action, and `--json` only with
  /// `--version`. Values are given as `--name VALUE` or `--name=VALUE`.
  static func parse(_ args: [String], options: [OptionSpec], program: String) throws(CommandFailure)
    -> TopLevelRequest
  {
    var given: [(name: String, value: String?)] = []
    var extra: [String] = []
    var i = 0
    while i < args.count {
      let arg = args[i]
      i += 1
      if arg == "-h" || arg == "--help" { return .help }
      guard arg.hasPrefix("-"), arg != "-" else {
        extra.append(arg)
        continue
      }
      let body = arg.drop { $0 == "-" }
      let name = String(body.prefix { $0 != "=" })
      let inline = body.firstIndex(of: "=").map { String(body[body.index(after: $0)...]) }
      guard arg.hasPrefix("--"), let option = options.first(where: { $0.name == name }) else {
        let known = options.map(\.name) + ["help"]
        throw .usage(
          .unknownOption(arg, command: program, suggestion: Suggestion.closest(to: name, among: known)))
      }
      if given.contains(where: { $0.name == name }) { throw .usage(.repeatedOption(name)) }
      guard let valueName = option.valueName else {
        if inline != nil { throw .usage(.unexpectedValue(option: name)) }
        given.append((name, nil))
        continue
      }
      if let inline {
        given.append((name, inline))
      } else if i < args.count, !args[i].hasPrefix("-") {
        given.append((name, args[i]))
        i += 1
      } else if option.valueIsOptional {
        given.append((name, nil))
      } else {
        throw .usage(.missingValue(option: name, valueName: valueName))
      }
    }
    if let first = extra.first { throw .usage(.unexpectedArgument(first)) }
    let json = given.contains { $0.name == "json" }
    let actions = given.filter { $0.name != "json" }
    guard let action = actions.first else {
      // Only --json: it says how to print, not what.
      throw .usage(.missingArgument("--version (--json goes with it)"))
    }
    if actions.count > 1 { throw .usage(.unexpectedArgument("--\(actions[1].name)")) }
    if json && action.name != "version" { throw .usage(.unexpectedArgument("--json")) }
    switch action.name {
    case "version":
      return .version(json: json)
    case "generate-completion-script":
      let raw = action.value ?? ""
      guard let shell = CompletionShell(rawValue: raw) else {
        let names = CompletionShell.allCases.map(\.rawValue).joined(separator: ", ")
        throw .usage(.invalidValue(option: action.name, value: raw, why: "expected one of \(names)"))
      }
      return .completionScript(shell)
    default:
      return .manual(directory: action.value)
    }
  }
}
