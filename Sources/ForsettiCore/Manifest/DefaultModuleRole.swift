/// A provider role a module may fill for others (`defaultModuleRole`, `requiredDefaultRoles`).
public enum DefaultModuleRole: String, Sendable, Hashable, CaseIterable, Comparable {
  case ui
  case sharedDatabase = "shared_database"
  case authentication
  case diagnostics
  case api
  case security

  /// The module types that may hold this role: `ui` for ui/app modules, the rest for services.
  public var validModuleTypes: Set<ModuleType> { self == .ui ? [.ui, .app] : [.service] }

  /// The capability a provider of this role must request; none for `ui`.
  public var requiredCapability: Capability? {
    switch self {
    case .ui: nil
    case .sharedDatabase: .sharedDatabase
    case .authentication: .authentication
    case .diagnostics: .diagnostics
    case .api: .api
    case .security: .security
    }
  }

  public static func < (a: DefaultModuleRole, b: DefaultModuleRole) -> Bool { a.rawValue < b.rawValue }
}
