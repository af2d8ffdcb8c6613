import ForsettiCore

/// What a host judges and where it keeps its state: the inputs of the gate stack that are
/// settings rather than files (the files are read when judging, so a change counts at once).
/// The command line fills one from its options; an application embedding the runtime fills
/// one itself.
public struct HostConfiguration: Sendable {
  public var manifestsDirectory: String
  /// Directories of module binaries; empty means binaries are not inspected (`check`, `list`).
  public var pluginDirectories: [String]
  public var discoveryMode: DiscoveryMode
  public var policy: any CapabilityPolicy
  /// A `PolicyFile`, read each time the host judges; when set it replaces `policy`.
  public var policyFile: String?
  /// `{"unlockedProducts":[…]}`, read each time the host judges.
  public var entitlementsFile: String?
  /// Development and CI: every requested capability counts as approved.
  public var approveAll: Bool
  public var hostVersion: SemanticVersion
  public var stateDirectory: String
  /// `dev --allow-all-entitlements` only: every product counts as unlocked.
  public var allowAllEntitlements: Bool
  /// Consulted beside the licences and the entitlements file, for an application that keeps
  /// its own record of purchases.
  public var entitlementSource: (any EntitlementProvider)?
  /// ForgeAccess's default policy: with `deny`, a free module runs only when enabled (activation
  /// state) or forced on by a module override.
  public var defaultPolicy: DefaultPolicy
  /// The in-memory override provider of both channels, between the persisted store and the
  /// time-frame windows; a reference, so every copy of this configuration sees one table.
  package var inMemoryOverrides = InMemoryOverrides()
  /// The operator's choice: every module binary must carry a matching signature by a key in
  /// `STATE/trusted-keys/modules/`. Off, an unsigned module is not refused.
  public var requireSignatures: Bool
  /// A running host's memory of its policy file (`PolicyMemory`): with one, an invalid file is
  /// judged as the last valid one and reported, not an error. Nil for offline tools.
  package var policyMemory: PolicyMemory?

  public init(
    manifestsDirectory: String, pluginDirectories: [String] = [], discoveryMode: DiscoveryMode = .fallback,
    policy: any CapabilityPolicy = AllowAllCapabilityPolicy(), entitlementsFile: String? = nil,
    approveAll: Bool = false, hostVersion: SemanticVersion = ForsettiVersion.current,
    stateDirectory: String, allowAllEntitlements: Bool = false,
    entitlementSource: (any EntitlementProvider)? = nil, defaultPolicy: DefaultPolicy = .allow,
    requireSignatures: Bool = false,
    policyFile: String? = nil
  ) {
    self.policyFile = policyFile
    self.manifestsDirectory = manifestsDirectory
    self.pluginDirectories = pluginDirectories
    self.discoveryMode = discoveryMode
    self.policy = policy
    self.entitlementsFile = entitlementsFile
    self.approveAll = approveAll
    self.hostVersion = hostVersion
    self.stateDirectory = stateDirectory
    self.allowAllEntitlements = allowAllEntitlements
    self.entitlementSource = entitlementSource
    self.defaultPolicy = defaultPolicy
    self.requireSignatures = requireSignatures
  }
}
