/// Template 1.1 `runtimeRequirements`: declared I/O, UI IDs and data isolation.
public struct RuntimeRequirements: Sendable, Hashable {
  public var io: [IORequirement]
  /// The `ui` block; nil when the manifest has none.
  public var ui: UIDeclarations?
  public var dataIsolation: DataIsolation

  public init(io: [IORequirement] = [], ui: UIDeclarations? = nil, dataIsolation: DataIsolation = .init()) {
    self.io = io
    self.ui = ui
    self.dataIsolation = dataIsolation
  }
}

/// One declared I/O need.
public struct IORequirement: Sendable, Hashable {
  public var requirementID: String
  public var kind: IOKind
  public var access: IOAccess
  /// A required I/O needs a provider before the module may start.
  public var required: Bool
  public var description: String?

  public init(
    requirementID: String, kind: IOKind, access: IOAccess, required: Bool, description: String? = nil
  ) {
    self.requirementID = requirementID
    self.kind = kind
    self.access = access
    self.required = required
    self.description = description
  }
}

/// The kinds of I/O a module may declare; each needs the capability of the same name.
public enum IOKind: String, Sendable, Hashable, CaseIterable {
  case networking
  case storage
  case secureStorage = "secure_storage"
  case fileExport = "file_export"
  case telemetry
  case sharedDatabase = "shared_database"
  case authentication
  case diagnostics
  case api
  case security

  /// The capability this kind of I/O needs.
  public var capability: Capability {
    // Every IOKind raw value is also a Capability raw value (checked by a test).
    Capability(rawValue: rawValue) ?? .networking
  }

  /// The default role that can provide this I/O when the host has no service for it.
  public var providingRole: DefaultModuleRole? { DefaultModuleRole(rawValue: rawValue) }
}

/// How a module uses a declared I/O.
public enum IOAccess: String, Sendable, Hashable, CaseIterable {
  case read
  case write
  case readWrite = "read_write"
  case execute
  case emit
  case consume
}

/// The IDs a module declares for its UI contributions (`runtimeRequirements.ui`).
public struct UIDeclarations: Sendable, Hashable {
  public var controlSchemeID: String?
  public var layoutID: String?
  public var themeIDs: [String]
  public var viewIDs: [String]
  public var slotIDs: [String]
  public var toolbarItemIDs: [String]
  public var routeIDs: [String]
  public var pointerIDs: [String]

  public init(
    controlSchemeID: String? = nil, layoutID: String? = nil, themeIDs: [String] = [],
    viewIDs: [String] = [], slotIDs: [String] = [], toolbarItemIDs: [String] = [],
    routeIDs: [String] = [], pointerIDs: [String] = []
  ) {
    self.controlSchemeID = controlSchemeID
    self.layoutID = layoutID
    self.themeIDs = themeIDs
    self.viewIDs = viewIDs
    self.slotIDs = slotIDs
    self.toolbarItemIDs = toolbarItemIDs
    self.routeIDs = routeIDs
    self.pointerIDs = pointerIDs
  }
}

/// Where a module's data lives.
public struct DataIsolation: Sendable, Hashable {
  public var mode: DataIsolationMode
  public var ownedStoreIDs: [String]
  /// Roles some discovered module must hold (`defaultModuleRole`) for this module to run. Host
  /// services can satisfy required I/O, but roles are held by modules only.
  public var requiredDefaultRoles: [DefaultModuleRole]

  public init(
    mode: DataIsolationMode = .privateToModule, ownedStoreIDs: [String] = [],
    requiredDefaultRoles: [DefaultModuleRole] = []
  ) {
    self.mode = mode
    self.ownedStoreIDs = ownedStoreIDs
    self.requiredDefaultRoles = requiredDefaultRoles
  }
}

/// `dataIsolation.mode`.
public enum DataIsolationMode: String, Sendable, Hashable, CaseIterable {
  case privateToModule = "private_to_module"
  /// Data shared through the host; needs a `shared_database` provider.
  case frameworkMediatedShared = "framework_mediated_shared"
}
