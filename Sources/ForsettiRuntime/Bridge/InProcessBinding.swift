import ForsettiBridge
import ForsettiCore

extension ModuleBinding {
  /// A binding for a module in this process, served by `environment`.
  public convenience init(moduleID: String, granted: Set<Capability>, environment: HostEnvironment)
    throws(BindingError)
  {
    try self.init(
      moduleID: moduleID, granted: granted, sandbox: environment.sandboxPath(for: moduleID),
      backend: InProcessBackend(environment: environment))
  }
}
