import ForsettiCore

/// Who may do what with a role service, stated once: the binding asks it when a module
/// resolves the service, the host on every call and every `serve`.
package enum RoleRules {
  /// Why `caller` may not resolve the service of `role`; nil when it may (it holds the role or
  /// consumes it — `StartOrder.consumedRoles` — and was granted the role's capability).
  package static func resolveProblem(_ caller: ModuleCaller, _ role: DefaultModuleRole) -> String? {
    if let problem = capabilityProblem(caller, role) { return problem }
    guard caller.serves == role || caller.calls.contains(role) else {
      return
        "the module neither holds the role \(role.rawValue) (defaultModuleRole) nor consumes it (dataIsolation.requiredDefaultRoles, an I/O requirement of kind \(role.rawValue))"
    }
    return nil
  }

  /// Why `caller` may not call the provider of `role`; nil when it may.
  package static func callProblem(_ caller: ModuleCaller, _ role: DefaultModuleRole) -> String? {
    if let problem = capabilityProblem(caller, role) { return problem }
    if caller.serves == role {
      return "the module holds the role \(role.rawValue): it serves it and cannot call it"
    }
    guard caller.calls.contains(role) else {
      return
        "the module does not consume the role \(role.rawValue) (dataIsolation.requiredDefaultRoles, an I/O requirement of kind \(role.rawValue))"
    }
    return nil
  }

  /// Why `caller` may not serve `role`; nil when it may.
  package static func serveProblem(_ caller: ModuleCaller, _ role: DefaultModuleRole) -> String? {
    if let problem = capabilityProblem(caller, role) { return problem }
    guard caller.serves == role else {
      return "the module does not hold the role \(role.rawValue) (its defaultModuleRole)"
    }
    return nil
  }

  private static func capabilityProblem(_ caller: ModuleCaller, _ role: DefaultModuleRole) -> String? {
    guard let needed = role.requiredCapability else {
      return "the role \(role.rawValue) is not served by modules"
    }
    guard caller.granted.contains(needed) else {
      return "the role \(role.rawValue) needs capability \(needed.rawValue), which was not granted"
    }
    return nil
  }
}
