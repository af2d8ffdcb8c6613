import ForsettiBridge
import ForsettiCore

extension ModuleBinding {
  /// A binding for a module in this process, served by `environment`.
  /// `serves` is the role it holds, `calls` the roles it consumes (`StartOrder.consumedRoles`).
  package convenience init(
    moduleID: String, granted: Set<Capability>, serves: DefaultModuleRole? = nil,
    calls: Set<DefaultModuleRole> = [], environment: HostEnvironment
  ) throws(BindingError) {
    try self.init(
      moduleID: moduleID, granted: granted, serves: serves, calls: calls,
      sandbox: environment.sandboxPath(for: moduleID), backend: InProcessBackend(environment: environment))
  }
}
