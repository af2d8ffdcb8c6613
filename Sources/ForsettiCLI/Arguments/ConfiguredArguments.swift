import ForsettiHost

/// Where an option's effective value came from.
public enum OptionOrigin: Sendable, Equatable {
  case commandLine
  /// The configuration file, on these lines (several for a repeatable option).
  case file(path: String, lines: [Int])
}

/// A verb's options with its configuration file folded in: per option, the command line wins
/// (a repeatable option given on the command line replaces the file's values, and
/// `--flag=false` turns off a flag the file turns on); what the command line leaves out, the
/// file gives; the rest keeps its default.
public struct ConfiguredArguments: Sendable, Equatable {
  /// The merged options, as the verb reads them.
  public var arguments: ParsedArguments
  /// The origin of every option given either way; an option absent here has its default.
  public var origins: [String: OptionOrigin]
  /// The configuration file read, if any.
  public var filePath: String?

  /// Folds `file` under the command line `p`; pure, so precedence is tested without a host.
  public static func merge(_ p: ParsedArguments, file: ConfigFile?, spec: CommandSpec) -> ConfiguredArguments
  {
    var out = ConfiguredArguments(arguments: p, origins: [:], filePath: file?.path)
    for key in p.values.keys { out.origins[key] = .commandLine }
    for key in p.flags.union(p.negatedFlags) { out.origins[key] = .commandLine }
    guard let file else { return out }
    for entry in file.entries where out.origins[entry.key] != .commandLine {
      let lines: [Int]
      if case .file(_, let earlier)? = out.origins[entry.key] {
        lines = earlier + [entry.line]
      } else {
        lines = [entry.line]
      }
      out.origins[entry.key] = .file(path: file.path, lines: lines)
      let isFlag = spec.options.first { $0.name == entry.key }?.valueName == nil
      if isFlag {
        // A flag set false in the file stays off; its origin still says the file set it.
        if entry.value == "true" { out.arguments.flags.insert(entry.key) }
      } else {
        out.arguments.values[entry.key, default: []].append(entry.value)
      }
    }
    return out
  }

  /// `failure` with its option's file and line when the file gave the value it is about, so
  /// `log-rate = many` is reported at `host.conf:7`, not as a command line nobody typed.
  public func attribute(_ failure: CommandFailure) -> CommandFailure {
    let option: String
    let value: String
    let why: String
    switch failure {
    case .several(let all): return .several(all.map(attribute))
    case .usage(.invalidValue(let o, let v, let w)): (option, value, why) = (o, v, w)
    case .configuration(.file(let o, let v, let w)), .configuration(.directory(let o, let v, let w)):
      (option, value, why) = (o, v, w)
    default: return failure
    }
    guard case .file(let path, let lines)? = origins[option], let first = lines.first else { return failure }
    let values = arguments.all(option)
    let line = values.firstIndex(of: value).flatMap { $0 < lines.count ? lines[$0] : nil } ?? first
    return .usage(.configFile(.invalidValue(path: path, line: line, key: option, value: value, why: why)))
  }
}
