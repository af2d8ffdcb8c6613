import ForsettiCore

/// How the command line takes each field a control failure can be about
/// (`ControlFailure.Field`): the one table from the request's and the configuration's names to
/// the options and arguments an operator typed. A host names fields as the request does, since
/// it answers the debug page and applications too; the command line shows its own names.
enum FailureFields {
  /// Where an operator gives a field.
  enum Spelling: Sendable, Equatable {
    /// The option `--NAME`.
    case option(String)
    /// The positional argument of this name in the verb's usage.
    case argument(String)

    /// The option's name without its dashes, or the argument's.
    var name: String {
      switch self {
      case .option(let name), .argument(let name): name
      }
    }

    /// As an operator reads it: `--state`, `MODULE_ID`.
    var text: String {
      switch self {
      case .option(let name): "--\(name)"
      case .argument(let name): name
      }
    }
  }

  static func spelling(_ field: ControlFailure.Field) -> Spelling {
    switch field {
    case .module: .argument("MODULE_ID")
    case .capabilities: .option("capabilities")
    case .action: .argument("on|off|clear")
    case .channel: .argument("module|product|list")
    case .id: .argument("ID")
    case .from: .option("from")
    case .until: .option("until")
    case .persisted: .option("persisted")
    case .windows: .option("windows")
    case .inMemory: .option("in-memory")
    case .selectNone: .option("none")
    case .stateDirectory: .option("state")
    case .manifestsDirectory: .option("manifests")
    case .policyFile: .option("policy")
    case .entitlementsFile: .option("entitlements")
    }
  }

  /// A control failure's message as the command line shows it: its fields by their options.
  static func message(_ failure: ControlFailure) -> String {
    failure.message(naming: { spelling($0).text })
  }
}
