/// The default-role table of the reference: `ui` belongs to ui/app modules and needs no
/// capability; every other role belongs to service modules that request the capability of the
/// same name.
public enum DefaultRoleRules {
  /// The problems with `m`'s `defaultModuleRole`; empty when it has none or it agrees.
  public static func problems(_ m: ModuleManifest) -> [String] {
    guard let role = m.defaultModuleRole else { return [] }
    var out: [String] = []
    if !role.validModuleTypes.contains(m.moduleType) {
      let types = role.validModuleTypes.map(\.rawValue).sorted().joined(separator: " or ")
      out.append(
        "defaultModuleRole \"\(role.rawValue)\" needs a \(types) module; this is a \(m.moduleType.rawValue) module"
      )
    }
    if let cap = role.requiredCapability, !m.capabilitySet.contains(cap) {
      out.append(
        "defaultModuleRole \"\(role.rawValue)\" needs capability \(cap.rawValue) in capabilitiesRequested")
    }
    return out
  }
}
