/// What a loaded module says about itself.
public struct ModuleDescriptor: Sendable, Hashable {
  public var moduleID: String
  public var moduleType: ModuleType
  public var moduleVersion: SemanticVersion

  public init(moduleID: String, moduleType: ModuleType, moduleVersion: SemanticVersion) {
    self.moduleID = moduleID
    self.moduleType = moduleType
    self.moduleVersion = moduleVersion
  }
}

/// Step 8 (identity half): the module's own descriptor must agree with its manifest, field by
/// field, or `start` is never called.
public enum IdentityRules {
  public static func check(_ m: ModuleManifest, _ d: ModuleDescriptor) -> GateOutcome {
    var diffs: [String] = []
    if d.moduleID != m.moduleID {
      diffs.append("moduleID: manifest \"\(m.moduleID)\", module says \"\(d.moduleID)\"")
    }
    if d.moduleType != m.moduleType {
      diffs.append("moduleType: manifest \(m.moduleType.rawValue), module says \(d.moduleType.rawValue)")
    }
    if d.moduleVersion != m.moduleVersion {
      diffs.append("moduleVersion: manifest \(m.moduleVersion), module says \(d.moduleVersion)")
    }
    return diffs.isEmpty ? .pass : .fail(.init(.moduleIdentityMismatch, diffs.joined(separator: "; ")))
  }
}
