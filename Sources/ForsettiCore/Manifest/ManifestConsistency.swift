/// The rules that tie one field of a decoded manifest to another, which upstream's loader
/// checks when it discovers the file (`validationFailed`), before any gate: the default role
/// agrees with the module type and the capabilities (`DefaultRoleRules`, the one statement of
/// that rule), and every declared I/O requests the capability of its kind.
public enum ManifestConsistency {
  /// Every such issue, in field order; empty when the fields agree.
  public static func issues(_ m: ModuleManifest) -> [ManifestIssue] {
    var out = DefaultRoleRules.issues(m)
    guard let io = m.runtimeRequirements?.io, !io.isEmpty else { return out }
    let caps = m.capabilitySet
    for (i, requirement) in io.enumerated() where !caps.contains(requirement.kind.capability) {
      out.append(
        .init(
          field: "runtimeRequirements.io[\(i)].kind",
          problem: .capabilityNotRequested(
            value: requirement.kind.rawValue, capability: requirement.kind.capability,
            orRemove: "the requirement \"\(requirement.requirementID)\"")))
    }
    return out
  }
}
