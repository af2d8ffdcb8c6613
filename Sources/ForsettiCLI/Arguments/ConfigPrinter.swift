import ForsettiCore
import ForsettiHost

/// `--print-config`: the effective options of a verb, in the configuration file's own format
/// (so the output, saved, is a configuration file giving the same options) or as JSON.
enum ConfigPrinter {
  /// Every option of `spec` but those of the file itself, in declaration order.
  static func printable(_ spec: CommandSpec) -> [OptionSpec] {
    spec.options.filter { !ConfigFile.refusedKeys.contains($0.name) }
  }

  /// One `# origin` comment, then the option's lines; an option left at its default is shown
  /// commented out, so re-reading the output leaves it at its default.
  static func text(_ c: ConfiguredArguments, spec: CommandSpec, program: String) -> String {
    var out =
      "# \(program) \(spec.name): effective options. Each '# from …' names where the line below comes from.\n"
    out += "# Configuration file: \(c.filePath ?? "none")\n"
    for option in printable(spec) {
      let name = option.name
      out += "\n"
      switch c.origins[name] {
      case .commandLine?: out += "# from the command line\n"
      case .file(let path, let lines)?:
        out += "# from \(path):\(lines.map(String.init).joined(separator: ","))\n"
      case nil:
        let d = option.valueName == nil ? "false" : (option.defaultDescription ?? "")
        out += d.isEmpty ? "# default: unset\n# \(name) =\n" : "# default\n# \(name) = \(d)\n"
        continue
      }
      if option.valueName == nil {
        out += "\(name) = \(c.arguments.flag(name))\n"
      } else {
        for v in c.arguments.all(name) {
          // A line break cannot be written in the file's syntax; say so rather than split it.
          out +=
            v.contains(where: \.isNewline)
            ? "# \(name): a value with a line break\n" : "\(name) = \(quoted(v))\n"
        }
      }
    }
    return out
  }

  /// `{"option": {"value": …, "from": "command line" | "FILE:LINE" | "default"}}`; a value is a
  /// string, an array for a repeatable option, a bool for a flag, null when unset.
  static func json(_ c: ConfiguredArguments, spec: CommandSpec) -> String {
    var pairs: [(String, JSONValue)] = []
    for option in printable(spec) {
      let name = option.name
      let value: JSONValue
      if option.valueName == nil {
        value = .bool(c.arguments.flag(name))
      } else if c.origins[name] == nil {
        value = option.defaultDescription.map { .string($0) } ?? .null
      } else if option.repeatable {
        value = .array(c.arguments.all(name).map { .string($0) })
      } else {
        value = c.arguments.value(name).map { .string($0) } ?? .null
      }
      let from: String
      switch c.origins[name] {
      case .commandLine?: from = "command line"
      case .file(let path, let lines)?: from = "\(path):\(lines.map(String.init).joined(separator: ","))"
      case nil: from = "default"
      }
      pairs.append((name, .object(JSONObject([("value", value), ("from", .string(from))]))))
    }
    return JSONWriter.string(.object(JSONObject(pairs)), pretty: true) + "\n"
  }

  /// A value the parser would change (blanks at either end, a leading `#`, quotes around it)
  /// goes in quotes, which the parser removes.
  static func quoted(_ v: String) -> String {
    let needs =
      v.first == " " || v.first == "\t" || v.last == " " || v.last == "\t" || v.hasPrefix("#")
      || (v.count >= 2 && v.hasPrefix("\"") && v.hasSuffix("\""))
    return needs ? "\"\(v)\"" : v
  }
}
