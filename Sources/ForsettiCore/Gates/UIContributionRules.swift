/// Step 8 (UI half): each contribution needs its capability (`missingCapability`); with template
/// 1.1, each contributed ID must be declared under `runtimeRequirements.ui`
/// (`unsatisfiedRuntimeRequirement`). Both are decided before the surface is updated.
public enum UIContributionRules {
  public static func check(_ m: ModuleManifest, _ c: UIContributions) -> GateOutcome {
    if c.isEmpty { return .pass }
    if m.moduleType == .service {
      return .fail(
        .init(
          .unsatisfiedRuntimeRequirement, "service modules cannot contribute UI; declare moduleType ui or app"
        ))
    }
    let caps = m.capabilitySet
    var missing: [String] = []
    func need(_ cap: Capability, _ what: String, when present: Bool) {
      if present && !caps.contains(cap) { missing.append("\(what) need capability \(cap.rawValue)") }
    }
    need(.toolbarItems, "toolbar items", when: !c.toolbarItems.isEmpty)
    need(.viewInjection, "view injections", when: !c.viewInjections.isEmpty)
    need(
      .routingOverlay, "overlay routes and pointers",
      when: !(c.overlay.map { $0.routes.isEmpty && $0.pointers.isEmpty } ?? true))
    need(.uiThemeMask, "a theme mask", when: c.themeMask != nil)
    if !missing.isEmpty { return .fail(.init(.missingCapability, missing.joined(separator: "; "))) }

    if let problems = c.themeMask?.problems, !problems.isEmpty {
      return .fail(.init(.validationFailed, problems.joined(separator: "; ")))
    }

    guard m.usesTemplate11 else { return .pass }
    guard let d = m.runtimeRequirements?.ui else {
      return .fail(
        .init(
          .unsatisfiedRuntimeRequirement,
          "template 1.1 ui/app modules with UI contributions must declare runtimeRequirements.ui"))
    }
    var undeclared: [String] = []
    func declared(_ ids: [String], in list: [String], _ field: String) {
      let known = Set(list)
      for id in ids where !known.contains(id) {
        undeclared.append("\"\(id)\" is not in runtimeRequirements.ui.\(field)")
      }
    }
    declared(c.themeMask.map { [$0.themeID] } ?? [], in: d.themeIDs, "themeIDs")
    declared(c.toolbarItems.map(\.itemID), in: d.toolbarItemIDs, "toolbarItemIDs")
    declared(c.toolbarItems.compactMap(\.actionRouteID), in: d.routeIDs, "routeIDs")
    declared(c.viewInjections.map(\.viewID), in: d.viewIDs, "viewIDs")
    declared(c.viewInjections.map(\.slotID), in: d.slotIDs, "slotIDs")
    declared(c.overlay?.routes ?? [], in: d.routeIDs, "routeIDs")
    declared(c.overlay?.pointers ?? [], in: d.pointerIDs, "pointerIDs")
    if !undeclared.isEmpty {
      return .fail(.init(.unsatisfiedRuntimeRequirement, undeclared.joined(separator: "; ")))
    }
    return .pass
  }
}
