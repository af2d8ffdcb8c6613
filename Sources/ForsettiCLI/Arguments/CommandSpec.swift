/// One `--option` of a verb, as declared once and used for both parsing and `--help`.
public struct OptionSpec: Sendable {
  public var name: String
  /// The value's placeholder (`DIR`); nil for a flag that takes no value.
  public var valueName: String?
  public var help: String
  /// Whether the option may be given more than once (its values accumulate).
  public var repeatable: Bool
  /// Shown in `--help` as "(default: …)".
  public var defaultDescription: String?
  /// The value may be left out (`--generate-manual [DIR]`).
  public var valueIsOptional = false

  public static func flag(_ name: String, _ help: String) -> OptionSpec {
    OptionSpec(name: name, valueName: nil, help: help, repeatable: false, defaultDescription: nil)
  }

  public static func value(
    _ name: String, _ valueName: String, _ help: String, default d: String? = nil, repeatable: Bool = false
  ) -> OptionSpec {
    OptionSpec(name: name, valueName: valueName, help: help, repeatable: repeatable, defaultDescription: d)
  }

  /// An option whose value may be left out; shown as `--name [VALUE]`.
  public static func optionalValue(_ name: String, _ valueName: String, _ help: String) -> OptionSpec {
    OptionSpec(
      name: name, valueName: valueName, help: help, repeatable: false, defaultDescription: nil,
      valueIsOptional: true)
  }

  /// `--name`, `--name VALUE` or `--name [VALUE]`, as help and manual pages show it.
  public var usage: String {
    guard let v = valueName else { return "--\(name)" }
    return valueIsOptional ? "--\(name) [\(v)]" : "--\(name) \(v)"
  }

  /// What the option's value is, for completion; nil for a flag.
  public var valueKind: ValueKind? { valueName.map(ValueKind.init(valueName:)) }
}

/// A positional argument of a verb.
public struct PositionalSpec: Sendable {
  public var name: String
  public var help: String
  public var optional: Bool

  public init(_ name: String, _ help: String, optional: Bool = false) {
    self.name = name
    self.help = help
    self.optional = optional
  }

  /// What the argument is, for completion.
  public var valueKind: ValueKind { ValueKind(valueName: name) }
}

/// What a value placeholder stands for, read from the placeholder the declaration already
/// shows in `--help`: completions are derived from it, so no verb states anything twice.
public enum ValueKind: Sendable, Equatable {
  /// One of the words of `a|b|c`.
  case choice([String])
  /// A directory (`DIR`).
  case directory
  /// A file (`FILE`, `MANIFEST`); `FILE.so` and the like name the extension it must have.
  case file(extension: String?)
  /// The ID of a module (`MODULE_ID`).
  case moduleID
  /// Anything else: a number, a name, an instant; nothing to offer.
  case text

  public init(valueName: String) {
    if valueName.contains("|") {
      self = .choice(valueName.split(separator: "|").map(String.init))
    } else if valueName == "DIR" {
      self = .directory
    } else if valueName == "FILE" || valueName == "MANIFEST" {
      self = .file(extension: nil)
    } else if valueName.hasPrefix("FILE."), valueName.count > 5 {
      self = .file(extension: String(valueName.dropFirst(5)))
    } else if valueName == "MODULE_ID" {
      self = .moduleID
    } else {
      self = .text
    }
  }
}

/// A verb of `forsetti-host`: its name, what it does, and what it accepts.
public struct CommandSpec: Sendable {
  public var name: String
  public var abstract: String
  public var discussion: String
  public var options: [OptionSpec]
  public var positionals: [PositionalSpec]

  public init(
    name: String, abstract: String, discussion: String = "", options: [OptionSpec] = [],
    positionals: [PositionalSpec] = []
  ) {
    self.name = name
    self.abstract = abstract
    self.discussion = discussion
    self.options = options
    self.positionals = positionals
  }

  /// The `--help` text, generated from the same declarations the parser uses.
  public func helpText(program: String) -> String {
    var usage = "\(program) \(name)"
    for p in positionals { usage += p.optional ? " [\(p.name)]" : " \(p.name)" }
    if !options.isEmpty { usage += " [options]" }
    var out = "\(abstract)\n\nUSAGE: \(usage)\n"
    if !positionals.isEmpty {
      out += "\nARGUMENTS:\n"
      for p in positionals { out += Self.row(p.name, p.help) }
    }
    out += "\nOPTIONS:\n"
    for o in options {
      let left = o.usage
      var help = o.help
      if let d = o.defaultDescription { help += " (default: \(d))" }
      if o.repeatable { help += " (repeatable)" }
      out += Self.row(left, help)
    }
    out += Self.row("-h, --help", "Show this help.")
    if !discussion.isEmpty { out += "\n\(discussion)\n" }
    return out
  }

  static func row(_ left: String, _ help: String) -> String {
    let pad = 28
    let l = "  " + left
    if l.count + 2 > pad { return l + "\n" + String(repeating: " ", count: pad) + help + "\n" }
    return l + String(repeating: " ", count: pad - l.count) + help + "\n"
  }
}

/// The whole command line as declared: the program, its own options and its verbs. Help,
/// completion scripts and manual pages are all generated from this one value.
public struct ProgramSpec: Sendable {
  public var name: String
  public var version: String
  /// What the program is, as one phrase (the manual's NAME line).
  public var summary: String
  /// What holds for every verb, in paragraphs.
  public var discussion: String
  /// Options given instead of a verb (`--version`, `--generate-manual`); `--help` is implied.
  public var options: [OptionSpec]
  public var commands: [CommandSpec]

  public init(
    name: String, version: String, summary: String, discussion: String, options: [OptionSpec],
    commands: [CommandSpec]
  ) {
    self.name = name
    self.version = version
    self.summary = summary
    self.discussion = discussion
    self.options = options
    self.commands = commands
  }

  /// The `help [COMMAND]` pseudo-verb, listed with the verbs and completed to a verb's name.
  public static let helpCommand = "help"
}
