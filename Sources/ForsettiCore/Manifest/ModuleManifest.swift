/// A validated module manifest (schema 1.0 or template 1.1). Build one with `ManifestDecoder`.
public struct ModuleManifest: Sendable, Hashable {
  /// As written; judged by `CompatibilityChecker`, not by decoding.
  public var schemaVersion: String
  /// As written, nil when absent (which means "1.0").
  public var manifestTemplateVersion: String?
  public var moduleID: String
  public var displayName: String
  public var moduleVersion: SemanticVersion
  public var moduleType: ModuleType
  public var supportedPlatforms: [Platform]
  public var minForsettiVersion: SemanticVersion
  public var maxForsettiVersion: SemanticVersion?
  public var capabilitiesRequested: [Capability]
  /// nil for a free module.
  public var iapProductID: String?
  /// The exported C symbol the host calls to instantiate the module.
  public var entryPoint: String
  public var defaultModuleRole: DefaultModuleRole?
  public var runtimeRequirements: RuntimeRequirements?

  public init(
    schemaVersion: String = "1.0", manifestTemplateVersion: String? = nil, moduleID: String,
    displayName: String, moduleVersion: SemanticVersion = .init(1, 0, 0), moduleType: ModuleType,
    supportedPlatforms: [Platform] = [.linux], minForsettiVersion: SemanticVersion = .init(0, 1, 0),
    maxForsettiVersion: SemanticVersion? = nil, capabilitiesRequested: [Capability] = [],
    iapProductID: String? = nil, entryPoint: String, defaultModuleRole: DefaultModuleRole? = nil,
    runtimeRequirements: RuntimeRequirements? = nil
  ) {
    self.schemaVersion = schemaVersion
    self.manifestTemplateVersion = manifestTemplateVersion
    self.moduleID = moduleID
    self.displayName = displayName
    self.moduleVersion = moduleVersion
    self.moduleType = moduleType
    self.supportedPlatforms = supportedPlatforms
    self.minForsettiVersion = minForsettiVersion
    self.maxForsettiVersion = maxForsettiVersion
    self.capabilitiesRequested = capabilitiesRequested
    self.iapProductID = iapProductID
    self.entryPoint = entryPoint
    self.defaultModuleRole = defaultModuleRole
    self.runtimeRequirements = runtimeRequirements
  }

  /// The template version in force: the declared one, or "1.0" when absent.
  public var effectiveTemplateVersion: String { manifestTemplateVersion ?? "1.0" }

  /// Whether template 1.1 rules (declared UI IDs) apply.
  public var usesTemplate11: Bool { effectiveTemplateVersion == "1.1" }

  /// The requested capabilities as a set.
  public var capabilitySet: Set<Capability> { Set(capabilitiesRequested) }
}
