import ForsettiRuntime

extension OptionSpec {
  /// `--state DIR`, as every verb that uses a state directory declares it.
  static func state(_ help: String) -> OptionSpec {
    .value("state", "DIR", help, default: DefaultStateDirectory.described)
  }
}

extension ParsedArguments {
  /// `--state`, or the default no other user can plant (`DefaultStateDirectory`).
  var stateDirectory: String { value("state") ?? DefaultStateDirectory.current }
}
