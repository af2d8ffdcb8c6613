import CForsetti
import ForsettiBinary
import ForsettiCore
import Glibc
import Synchronization

/// One started module as the host sees it: its identity, what it was granted, and the C host
/// table whose every function is a libffi closure bound to this object.
///
/// Revocation is a flag checked at the top of every bound function. The binding, its closures
/// and its C strings are never freed (see `FFIClosure`), so a late call from a leftover module
/// thread finds a revoked binding, never freed memory.
public final class ModuleBinding: Sendable {
  public let moduleID: String
  /// What the module was granted.
  public var granted: Set<Capability> { caller.granted }
  /// The module as the host bound it, for the services that check who calls.
  package let caller: ModuleCaller
  package let backend: any HostBackend
  package let storage: SandboxStorage?
  private let revoked = Atomic<Bool>(false)

  // C memory owned by the binding for the life of the process.
  private let table: CPointer<forsetti_host>
  private let idCString: CPointer<CChar>
  /// A copy of the ID the module never sees, to check `idCString` against without making a C
  /// string of `moduleID` (an allocation) on every send and publish.
  private let expectedID: CPointer<CChar>
  private let services: Mutex<[String: CRawPointer]>

  /// The host table passed to the module's `start`.
  public var hostTable: UnsafePointer<forsetti_host> { UnsafePointer(table.pointer) }

  public var isRevoked: Bool { revoked.load(ordering: .acquiring) }

  /// Ends every host function of this module: later calls return FORSETTI_ERR_REVOKED.
  public func revoke() {
    revoked.store(true, ordering: .releasing)
    backend.moduleStopped(moduleID: moduleID)
  }

  package init(
    moduleID: String, granted: Set<Capability>, serves: DefaultModuleRole? = nil,
    calls: Set<DefaultModuleRole> = [],
    sandbox: String, backend: any HostBackend
  ) throws(BindingError) {
    self.moduleID = moduleID
    caller = ModuleCaller(moduleID: moduleID, granted: granted, serves: serves, calls: calls)
    self.backend = backend
    backend.moduleStarting(moduleID: moduleID)
    do { storage = try SandboxStorage(root: sandbox) } catch { throw .sandbox(error.description) }
    guard let id = strdup(moduleID), let expected = strdup(moduleID), let box = strdup(sandbox) else {
      throw .outOfMemory
    }
    idCString = CPointer(id)
    expectedID = CPointer(expected)
    table = CPointer(.allocate(capacity: 1))
    services = Mutex([:])
    table.pointer.initialize(
      to: forsetti_host(
        abi_version: DynamicLoader.hostABI, struct_size: UInt32(MemoryLayout<forsetti_host>.size),
        module_id: UnsafePointer(id), sandbox_path: UnsafePointer(box), log: nil, resolve: nil))
    try HostFunctions.install(on: self, table: table.pointer)
  }

  /// The service table for `serviceID` if granted; nil (and a warning) otherwise.
  package func resolve(_ serviceID: String) -> UnsafeRawPointer? {
    // Host service IDs break the application's ID rule: an ID is one or the other.
    if ApplicationServiceID.problem(serviceID) == nil {
      guard HostFunctions.applicationServiceOffered(serviceID, to: self) else { return nil }
      return cachedTable(serviceID) { b throws(BindingError) in
        try HostFunctions.applicationService(b, serviceID)
      }
    }
    guard let access = HostFunctions.access(serviceID) else {
      warn("denied service resolution: unknown service \"\(serviceID)\"", ["service": serviceID])
      return nil
    }
    if let needed = access.capability, !granted.contains(needed) {
      warn(
        "denied service resolution: \(serviceID) needs capability \(needed.rawValue), which was not granted",
        ["service": serviceID, "capability": needed.rawValue])
      return nil
    }
    if let role = access.role, let problem = RoleRules.resolveProblem(caller, role) {
      warn(
        "denied service resolution: \(serviceID): \(problem)", ["service": serviceID, "role": role.rawValue])
      return nil
    }
    return cachedTable(serviceID) { b throws(BindingError) in
      try HostFunctions.serviceTable(serviceID, for: b)
    }
  }

  /// The table of `serviceID` this binding built before, or the one `make` builds now.
  private func cachedTable(
    _ serviceID: String, _ make: (ModuleBinding) throws(BindingError) -> UnsafeMutableRawPointer?
  ) -> UnsafeRawPointer? {
    if let existing = services.withLock({ $0[serviceID] }) { return UnsafeRawPointer(existing.pointer) }
    do {
      guard let made = try make(self) else { return nil }
      // Two threads may race to build a table; the first stored wins, the other is leaked
      // (tables are never freed anyway, see FFIClosure).
      let winner: CRawPointer = services.withLock { s in
        if let existing = s[serviceID] { return existing }
        s[serviceID] = CRawPointer(made)
        return CRawPointer(made)
      }
      return UnsafeRawPointer(winner.pointer)
    } catch {
      warn("service \(serviceID) could not be built: \(error)", ["service": serviceID])
      return nil
    }
  }

  /// Whether the module left its host table's identity alone. A module that overwrites
  /// `module_id` is trying to act as someone else; the host never reads that field, but says so.
  package func identityIntact() -> Bool {
    let t = table.pointer.pointee
    if t.module_id == UnsafePointer(idCString.pointer), strcmp(idCString.pointer, expectedID.pointer) == 0 {
      return true
    }
    warn(
      "\(ReasonCode.moduleIdentitySpoofingDenied.rawValue): the module altered host->module_id; its sends and publishes are refused (it is still \(moduleID) to the host)",
      ["reason": ReasonCode.moduleIdentitySpoofingDenied.rawValue])
    return false
  }

  package func log(_ level: LogLevel, _ message: String, _ metadata: [String: String] = [:]) {
    backend.log(moduleID: moduleID, level: level, message: message, metadata: metadata)
  }

  package func warn(_ message: String, _ metadata: [String: String] = [:]) {
    backend.log(moduleID: moduleID, level: .warning, message: message, metadata: metadata)
  }
}

/// Why a binding could not be made.
public enum BindingError: Error, Sendable, CustomStringConvertible {
  case sandbox(String)
  case outOfMemory
  case closure(String)

  public var description: String {
    switch self {
    case .sandbox(let s): s
    case .outOfMemory: "out of memory"
    case .closure(let s): "libffi closure: \(s)"
    }
  }
}

/// A pointer to C memory the host owns forever; sendable because it is never freed and the
/// memory it points to is written once before it is shared.
package struct CPointer<T>: @unchecked Sendable {
  package let pointer: UnsafeMutablePointer<T>
  package init(_ p: UnsafeMutablePointer<T>) { pointer = p }
}

/// The untyped form of `CPointer`.
package struct CRawPointer: @unchecked Sendable {
  // @unchecked: as CPointer.
  package let pointer: UnsafeMutableRawPointer
  package init(_ p: UnsafeMutableRawPointer) { pointer = p }
}
