/// Decides whether a module may be granted a capability it requests. Implement this for
/// product-specific governance; `AllowAllCapabilityPolicy` and `FixedCapabilityPolicy` cover
/// development and locked-down hosts.
public protocol CapabilityPolicy: Sendable {
  /// Whether `moduleID` may be granted `capability`.
  func allows(moduleID: String, capability: Capability) -> Bool
  /// A short name for traces and `--help` ("allow-all", "fixed: storage, telemetry").
  var name: String { get }
  /// Why `capabilities` are denied to `moduleID`, for the trace: the deciding input.
  func denial(moduleID: String, capabilities: [Capability]) -> String
}

extension CapabilityPolicy {
  /// A policy with no finer reason than its name: "policy fixed: storage denies networking".
  public func denial(moduleID: String, capabilities: [Capability]) -> String {
    "policy \(name) denies " + capabilities.map(\.rawValue).joined(separator: ", ")
  }
}

/// Allows every requested capability (tests, local development, simple hosts).
public struct AllowAllCapabilityPolicy: CapabilityPolicy {
  public init() {}
  public func allows(moduleID: String, capability: Capability) -> Bool { true }
  public var name: String { "allow-all" }
}

/// Allows only a configured set of capabilities.
public struct FixedCapabilityPolicy: CapabilityPolicy {
  public var allowed: Set<Capability>

  public init(_ allowed: Set<Capability>) { self.allowed = allowed }

  public func allows(moduleID: String, capability: Capability) -> Bool { allowed.contains(capability) }

  public var name: String {
    allowed.isEmpty ? "fixed (none)" : "fixed: " + allowed.sorted().map(\.rawValue).joined(separator: ", ")
  }
}
