/// Which providers exist for runtime requirements: the host's own services and the default
/// roles held by discovered modules (a discovered provider counts even before it is active, but
/// only when its role agrees with it: the module type the role is for, and the role's capability
/// requested — a ui module claiming shared_database provides nothing, as upstream).
public struct ProviderAvailability: Sendable, Hashable {
  /// I/O kinds the host serves itself.
  public var hostServices: Set<IOKind>
  /// Role → IDs of discovered modules that declare it as their `defaultModuleRole`.
  public var roleProviders: [DefaultModuleRole: [String]]

  /// The I/O the Linux host serves in-process today.
  public static let defaultHostServices: Set<IOKind> = [.storage, .telemetry, .secureStorage, .fileExport]

  public init(
    hostServices: Set<IOKind> = defaultHostServices, roleProviders: [DefaultModuleRole: [String]] = [:]
  ) {
    self.hostServices = hostServices
    self.roleProviders = roleProviders
  }

  /// Availability for a set of discovered manifests.
  public init(hostServices: Set<IOKind> = defaultHostServices, discovered: [ModuleManifest]) {
    var roles: [DefaultModuleRole: [String]] = [:]
    for m in discovered {
      if let r = m.defaultModuleRole, DefaultRoleRules.problems(m).isEmpty {
        roles[r, default: []].append(m.moduleID)
      }
    }
    self.init(hostServices: hostServices, roleProviders: roles)
  }

  /// Who can provide `kind`: "host service", a module ID, or nil.
  public func provider(for kind: IOKind) -> String? {
    if hostServices.contains(kind) { return "host service" }
    if let role = kind.providingRole, let id = roleProviders[role]?.first { return id }
    return nil
  }
}

/// Step 6: declared needs can actually be met before any lifecycle code runs.
public enum RuntimeRequirementRules {
  /// Every unmet requirement, as one `unsatisfiedRuntimeRequirement` naming them all.
  public static func check(_ m: ModuleManifest, providers: ProviderAvailability) -> GateOutcome {
    let all = problems(m, providers: providers)
    if all.isEmpty { return .pass }
    return .fail(.init(.unsatisfiedRuntimeRequirement, all.joined(separator: "; ")))
  }

  /// The unmet requirements, each a sentence naming field, need and what is missing.
  public static func problems(_ m: ModuleManifest, providers: ProviderAvailability) -> [String] {
    var out = DefaultRoleRules.problems(m)
    guard let rr = m.runtimeRequirements else { return out }
    let caps = m.capabilitySet
    for (i, io) in rr.io.enumerated() {
      let name = "runtimeRequirements.io[\(i)] (\(io.requirementID))"
      if !caps.contains(io.kind.capability) {
        out.append(
          "\(name): kind \(io.kind.rawValue) needs capability \(io.kind.capability.rawValue) in capabilitiesRequested"
        )
      }
      if io.required && providers.provider(for: io.kind) == nil {
        let via =
          io.kind.providingRole.map { " and no discovered module holds defaultModuleRole \"\($0.rawValue)\"" }
          ?? ""
        out.append(
          "\(name): required \(io.kind.rawValue) has no provider: the host has no \(io.kind.rawValue) service\(via)"
        )
      }
    }
    if rr.dataIsolation.mode == .frameworkMediatedShared && providers.provider(for: .sharedDatabase) == nil {
      out.append(
        "runtimeRequirements.dataIsolation.mode framework_mediated_shared needs a shared_database provider; none is discovered"
      )
    }
    for role in rr.dataIsolation.requiredDefaultRoles where providers.roleProviders[role, default: []].isEmpty
    {
      out.append(
        "runtimeRequirements.dataIsolation.requiredDefaultRoles: no discovered module holds defaultModuleRole \"\(role.rawValue)\""
      )
    }
    return out
  }

  /// The trace line for a passing module.
  public static func passDetail(_ m: ModuleManifest, providers: ProviderAvailability) -> String {
    guard let rr = m.runtimeRequirements else {
      return "no runtime requirements declared"
        + (m.defaultModuleRole.map { "; role \($0.rawValue) agrees" } ?? "")
    }
    let io = rr.io.map { "\($0.kind.rawValue)→\(providers.provider(for: $0.kind) ?? "optional, none")" }
    // Which module satisfied each role the module needs, so a trace says who it depends on.
    var roles: [String] = []
    if rr.dataIsolation.mode == .frameworkMediatedShared, let p = providers.provider(for: .sharedDatabase) {
      roles.append("shared_database→\(p)")
    }
    for role in rr.dataIsolation.requiredDefaultRoles.sorted() {
      guard let p = providers.roleProviders[role]?.first else { continue }
      let entry = "\(role.rawValue)→\(p)"
      if !roles.contains(entry) { roles.append(entry) }
    }
    return "io [\(io.joined(separator: ", "))], isolation \(rr.dataIsolation.mode.rawValue)"
      + (roles.isEmpty ? "" : ", roles [\(roles.joined(separator: ", "))]")
  }
}
