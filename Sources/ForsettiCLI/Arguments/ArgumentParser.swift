import ForsettiCore

/// Parsed options and positionals of one verb.
public struct ParsedArguments: Sendable, Equatable {
  public var values: [String: [String]] = [:]
  public var flags: Set<String> = []
  /// Flags turned off with `--flag=false`: off whatever a configuration file says.
  public var negatedFlags: Set<String> = []
  public var positionals: [String] = []
  /// `-h`/`--help` was given: show help and do nothing else.
  public var helpRequested = false

  public func flag(_ name: String) -> Bool { flags.contains(name) }
  public func value(_ name: String) -> String? { values[name]?.last }
  public func all(_ name: String) -> [String] { values[name] ?? [] }
}

/// Parses the arguments of one verb against its `CommandSpec`: `--name value`, `--name=value`,
/// flags (`--flag`, or `--flag=true|false` so the command line can turn off what a
/// configuration file turns on), positionals, and `--` to end options.
public enum ArgumentParser {
  public static func parse(_ args: [String], for spec: CommandSpec) throws(UsageError) -> ParsedArguments {
    var out = ParsedArguments()
    var i = 0
    var optionsEnded = false
    while i < args.count {
      let arg = args[i]
      i += 1
      if optionsEnded || !arg.hasPrefix("-") || arg == "-" {
        out.positionals.append(arg)
        continue
      }
      if arg == "--" {
        optionsEnded = true
        continue
      }
      if arg == "-h" || arg == "--help" {
        out.helpRequested = true
        continue
      }
      guard arg.hasPrefix("--") else {
        throw .unknownOption(
          arg, command: spec.name, suggestion: suggest(String(arg.drop { $0 == "-" }), spec))
      }
      let body = arg.dropFirst(2)
      let name: String
      var inline: String?
      if let eq = body.firstIndex(of: "=") {
        name = String(body[..<eq])
        inline = String(body[body.index(after: eq)...])
      } else {
        name = String(body)
      }
      guard let option = spec.options.first(where: { $0.name == name }) else {
        throw .unknownOption("--\(name)", command: spec.name, suggestion: suggest(name, spec))
      }
      if let valueName = option.valueName {
        let value: String
        if let inline {
          value = inline
        } else {
          guard i < args.count, !(args[i].hasPrefix("--") && args[i].count > 2) else {
            throw .missingValue(option: name, valueName: valueName)
          }
          value = args[i]
          i += 1
        }
        if !option.repeatable && out.values[name] != nil { throw .repeatedOption(name) }
        out.values[name, default: []].append(value)
      } else {
        switch inline {
        case nil, "true":
          out.flags.insert(name)
          out.negatedFlags.remove(name)
        case "false":
          out.flags.remove(name)
          out.negatedFlags.insert(name)
        default:
          throw .unexpectedValue(option: name)
        }
      }
    }
    // With -h/--help the verb is not run, so its positionals need not be complete.
    if out.helpRequested { return out }
    try checkPositionals(out, for: spec)
    return out
  }

  /// That `p` has every positional `spec` requires and none it does not declare: a verb
  /// reads its required positionals by index, so nothing calls it without this holding.
  public static func checkPositionals(_ p: ParsedArguments, for spec: CommandSpec) throws(UsageError) {
    let required = spec.positionals.filter { !$0.optional }
    if p.positionals.count < required.count {
      throw .missingArgument(required[p.positionals.count].name)
    }
    if p.positionals.count > spec.positionals.count {
      throw .unexpectedArgument(p.positionals[spec.positionals.count])
    }
  }

  static func suggest(_ name: String, _ spec: CommandSpec) -> String? {
    Suggestion.closest(to: name, among: spec.options.map(\.name) + ["help"])
  }
}
