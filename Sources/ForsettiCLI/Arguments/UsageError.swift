import ForsettiHost

/// A command line that cannot be run as written. Every case names the offending word.
public enum UsageError: Error, Sendable, Equatable, CustomStringConvertible {
  case unknownCommand(String, suggestion: String?)
  case unknownOption(String, command: String, suggestion: String?)
  case missingValue(option: String, valueName: String)
  case unexpectedValue(option: String)
  case repeatedOption(String)
  case missingArgument(String)
  case unexpectedArgument(String)
  case invalidValue(option: String, value: String, why: String)
  /// `option` was given with `other`, which takes no such thing.
  case notWith(option: String, other: String)
  /// The configuration file (`--config`) cannot be used as written.
  case configFile(ConfigFileError)

  public var description: String {
    switch self {
    case .unknownCommand(let c, let s):
      return "unknown command '\(c)'" + (s.map { "; did you mean '\($0)'?" } ?? "")
    case .unknownOption(let o, let command, let s):
      return "unknown option '\(o)' for '\(command)'" + (s.map { "; did you mean '--\($0)'?" } ?? "")
    case .missingValue(let o, let v):
      return "option '--\(o)' needs a value \(v)"
    case .unexpectedValue(let o):
      return "option '--\(o)' is a flag: it takes no value but true or false"
    case .repeatedOption(let o):
      return "option '--\(o)' is given more than once"
    case .missingArgument(let a):
      return "missing argument \(a)"
    case .unexpectedArgument(let a):
      return "unexpected argument '\(a)'"
    case .invalidValue(let o, let v, let why):
      return "invalid value '\(v)' for '--\(o)': \(why)"
    case .notWith(let o, let other):
      return "--\(o) does not go with --\(other)"
    case .configFile(.missing(let path)):
      // The library's words name no flag; the command line's way to name another file is one.
      return "\(ConfigFileError.missing(path: path)) with --config FILE"
    case .configFile(let e):
      return e.description
    }
  }
}
