/// The default-role table of the reference: `ui` belongs to ui/app modules and needs no
/// capability; every other role belongs to service modules that request the capability of the
/// same name. The one statement of that rule: discovery refuses a manifest that breaks it
/// (`validationFailed`), and the runtime-requirement gate re-checks manifests made elsewhere.
public enum DefaultRoleRules {
  /// What is wrong with `m`'s `defaultModuleRole`, as issues on that field; empty when it has
  /// none or it agrees with the module type and the capabilities.
  public static func issues(_ m: ModuleManifest) -> [ManifestIssue] {
    guard let role = m.defaultModuleRole else { return [] }
    var out: [ManifestIssue] = []
    if !role.validModuleTypes.contains(m.moduleType) {
      out.append(.init(field: "defaultModuleRole", problem: .roleNotForModuleType(role, m.moduleType)))
    }
    if let cap = role.requiredCapability, !m.capabilitySet.contains(cap) {
      out.append(
        .init(
          field: "defaultModuleRole",
          problem: .capabilityNotRequested(
            value: role.rawValue, capability: cap, orRemove: "defaultModuleRole")))
    }
    return out
  }

  /// The same issues as sentences naming the field; empty when the role agrees.
  public static func problems(_ m: ModuleManifest) -> [String] { issues(m).map(\.description) }
}
