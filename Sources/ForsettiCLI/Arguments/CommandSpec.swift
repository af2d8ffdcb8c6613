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

  public static func flag(_ name: String, _ help: String) -> OptionSpec {
    OptionSpec(name: name, valueName: nil, help: help, repeatable: false, defaultDescription: nil)
  }

  public static func value(
    _ name: String, _ valueName: String, _ help: String, default d: String? = nil, repeatable: Bool = false
  ) -> OptionSpec {
    OptionSpec(name: name, valueName: valueName, help: help, repeatable: repeatable, defaultDescription: d)
  }
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
      var left = "--\(o.name)"
      if let v = o.valueName { left += " \(v)" }
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
