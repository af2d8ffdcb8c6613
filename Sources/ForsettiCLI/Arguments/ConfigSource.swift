import ForsettiHost

/// Which configuration file `run` and `dev` read, and the two options that choose and show it.
public enum ConfigSource {
  /// Read when present and no `--config` is given; the Debian package ships it.
  public static let defaultPath = "/etc/forsetti/host.conf"
  /// Names another default file; empty, no default file at all. For tests and for hosts that
  /// must not pick up the machine's file; `--config` still wins over it.
  public static let environmentVariable = "FORSETTI_HOST_CONFIG"

  /// `--config` and `--print-config`, as `run` (and so `dev`) declares them.
  static let specs: [OptionSpec] = [
    .value(
      "config", "FILE",
      "Read options from FILE, 'option = value' lines; the command line wins. Without it, \(defaultPath) "
        + "when present (\(environmentVariable) names another; empty: none)."),
    .flag(
      "print-config",
      "Print the effective options (command line, file and defaults) as a configuration file, or JSON with --json, "
        + "check them as the verb would, and exit (2 when one is wrong)."
    ),
  ]

  /// The keys a file may hold: those of `dev`, a superset of `run`'s. One file serves both
  /// verbs, so `run` skips dev's own keys (`grace`, `debounce`, …) instead of refusing them.
  static var fileSpec: CommandSpec { DevCommand.spec }

  /// The configuration of `p` for `spec`: the `--config` file, which must exist; else the
  /// default file if it exists (a default file that exists but cannot be read is an error all
  /// the same). Entries for keys of `fileSpec` that `spec` lacks are left out.
  static func load(
    _ p: ParsedArguments, spec: CommandSpec, environment: [String: String]
  ) throws(ConfigFileError) -> ConfigFile? {
    let file: ConfigFile?
    if let named = p.value("config") {
      file = try ConfigFile.read(named, keys: fileSpec.configKeys)
    } else {
      let path = environment[environmentVariable] ?? defaultPath
      if path.isEmpty { return nil }
      do { file = try ConfigFile.read(path, keys: fileSpec.configKeys) } catch .missing { return nil }
    }
    return file.map { f in
      ConfigFile(path: f.path, entries: f.entries.filter { e in spec.options.contains { $0.name == e.key } })
    }
  }
}
