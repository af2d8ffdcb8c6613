/// Step 3: may this manifest run on this host at all? Schema and template versions, platform,
/// host version range and capability policy, checked in that order; the first failure decides.
public struct CompatibilityChecker: Sendable {
  public static let supportedSchemaVersions = ["1.0", "1.1"]
  public static let supportedTemplateVersions = ["1.0", "1.1"]

  public var hostVersion: SemanticVersion
  public var platform: Platform
  public var policy: any CapabilityPolicy

  public init(
    hostVersion: SemanticVersion = ForsettiVersion.current, platform: Platform = .host,
    policy: any CapabilityPolicy = AllowAllCapabilityPolicy()
  ) {
    self.hostVersion = hostVersion
    self.platform = platform
    self.policy = policy
  }

  /// The first compatibility problem of `manifest`, or `.pass`.
  public func check(_ m: ModuleManifest) -> GateOutcome {
    let supported = Self.supportedSchemaVersions.joined(separator: " or ")
    guard Self.supportedSchemaVersions.contains(m.schemaVersion) else {
      return .fail(
        .init(.invalidSchemaVersion, "schemaVersion is \"\(m.schemaVersion)\"; this host reads \(supported)"))
    }
    if let t = m.manifestTemplateVersion, !Self.supportedTemplateVersions.contains(t) {
      return .fail(
        .init(
          .invalidManifestTemplateVersion,
          "manifestTemplateVersion is \"\(t)\"; this host reads "
            + Self.supportedTemplateVersions.joined(separator: " or ")))
    }
    if m.schemaVersion == "1.1" && m.effectiveTemplateVersion != "1.1" {
      let actual = m.manifestTemplateVersion.map { "\"\($0)\"" } ?? "missing (meaning \"1.0\")"
      return .fail(
        .init(
          .invalidManifestTemplateVersion,
          "schemaVersion 1.1 requires manifestTemplateVersion \"1.1\"; it is \(actual)"))
    }
    guard m.supportedPlatforms.contains(platform) else {
      let listed = m.supportedPlatforms.map(\.rawValue).joined(separator: ", ")
      return .fail(
        .init(
          .unsupportedPlatform,
          "supportedPlatforms is [\(listed)]; add \"\(platform.rawValue)\" to run on this host"))
    }
    if hostVersion < m.minForsettiVersion {
      return .fail(
        .init(
          .unsupportedForsettiVersion,
          "host is \(hostVersion); the module needs at least \(m.minForsettiVersion) (minForsettiVersion)"))
    }
    if let max = m.maxForsettiVersion, hostVersion > max {
      return .fail(
        .init(
          .unsupportedForsettiVersion,
          "host is \(hostVersion); the module supports at most \(max) (maxForsettiVersion)"))
    }
    let denied = m.capabilitiesRequested.filter { !policy.allows(moduleID: m.moduleID, capability: $0) }
    if !denied.isEmpty {
      return .fail(.init(.capabilityDenied, policy.denial(moduleID: m.moduleID, capabilities: denied)))
    }
    return .pass
  }

  /// A one-line summary of what passed, for the trace.
  public func passDetail(_ m: ModuleManifest) -> String {
    let range = "\(m.minForsettiVersion)…" + (m.maxForsettiVersion.map(\.description) ?? "")
    return
      "schema \(m.schemaVersion), template \(m.effectiveTemplateVersion), \(platform.rawValue), host \(hostVersion) in \(range), policy \(policy.name)"
  }
}
