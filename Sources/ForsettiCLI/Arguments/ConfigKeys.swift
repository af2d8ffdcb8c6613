import ForsettiHost

extension CommandSpec {
  /// The keys a configuration file may hold for this verb: its long options.
  var configKeys: [ConfigKey] {
    options.map { ConfigKey(name: $0.name, isFlag: $0.valueName == nil, repeatable: $0.repeatable) }
  }
}
