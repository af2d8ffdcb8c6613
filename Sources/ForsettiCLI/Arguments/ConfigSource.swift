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
      "Print the effective options (command line, file and defaults) as a configuration file, or JSON with --json, and exit."
    ),
  ]

  /// The configuration of `p`: the `--config` file, which must exist; else the default file
  /// if it exists (a default file that exists but cannot be read is an error all the same).
  static func load(
    _ p: ParsedArguments, spec: CommandSpec, environment: [String: String]
  ) throws(ConfigFileError) -> ConfigFile? {
    if let named = p.value("config") { return try ConfigFile.read(named, spec: spec) }
    let path = environment[environmentVariable] ?? defaultPath
    if path.isEmpty { return nil }
    do { return try ConfigFile.read(path, spec: spec) } catch .missing { return nil }
  }
}
