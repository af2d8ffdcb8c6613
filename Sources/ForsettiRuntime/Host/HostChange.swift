import ForsettiCore

/// What `LiveHost.onChange` reports.
public enum HostChange: Sendable {
  /// A module's record after its state changed.
  case module(ModuleRecord)
  /// The composed UI surface after it changed.
  case surface(Surface)
}
