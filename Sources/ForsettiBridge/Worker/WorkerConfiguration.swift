import ForsettiCore
import Glibc

/// Everything a worker needs, sent as the JSON of the host's `configure` frame.
public struct WorkerConfiguration: Sendable, Hashable {
  /// The protocol the host speaks (`ProtocolVersion`): the worker checks it before anything else.
  public var protocolVersion: Int
  public var moduleID: String
  public var library: String
  public var entryPoint: String
  public var isSwift: Bool
  public var sandbox: String
  public var granted: Set<Capability>
  /// The default role the module holds (and may serve), and the roles it consumes (and may call).
  public var serves: DefaultModuleRole?
  public var calls: Set<DefaultModuleRole>
  public var policy: ConfinementPolicy
  /// The host's PID: a worker whose parent is not this host exits at once.
  public var parent: Int32
  /// The worker's whole process environment, set before the module is loaded: nothing else of
  /// what the worker was started with remains (the rule: `WorkerEnvironment` in the host).
  public var environment: [String: String]
  /// The `tasks` files of the worker's own cgroup v1 hierarchies: the worker writes `0` into
  /// each, moving its only thread there, before it confines itself. Moving oneself thread by
  /// thread is the one cgroup move the kernel makes without waiting for an RCU grace period
  /// (the host writing the pid into `cgroup.procs` waited 7–13 ms here). Empty: the host put the
  /// worker in its cgroup (cgroup v2, a spare) or there is none.
  public var cgroupTasks: [String] = []

  public var json: JSONValue {
    let l = policy.limits
    func num(_ v: UInt64?) -> JSONValue { v.map { .number(String($0)) } ?? .null }
    return .object(
      JSONObject([
        (ProtocolVersion.member, .number(String(protocolVersion))),
        ("moduleID", .string(moduleID)), ("library", .string(library)), ("entryPoint", .string(entryPoint)),
        ("isSwift", .bool(isSwift)), ("sandbox", .string(sandbox)),
        ("granted", .strings(granted.sorted().map(\.rawValue))),
        ("serves", serves.map { .string($0.rawValue) } ?? .null),
        ("calls", .strings(calls.sorted().map(\.rawValue))),
        ("readExecute", .strings(policy.readExecute)), ("readWrite", .strings(policy.readWrite)),
        ("networking", .bool(policy.networking)), ("memoryAccounted", .bool(policy.memoryAccounted)),
        ("networkNamespace", .bool(policy.networkNamespace)),
        ("temporaryDirectory", policy.temporaryDirectory.map { .string($0) } ?? .null),
        (
          "limits",
          .object(
            JSONObject([
              ("memoryBytes", num(l.memoryBytes)), ("cpuSeconds", num(l.cpuSeconds)),
              ("openFiles", num(l.openFiles)),
              ("fileSizeBytes", num(l.fileSizeBytes)), ("temporaryBytes", num(l.temporaryBytes)),
            ]))
        ),
        ("parent", .number(String(parent))),
        ("cgroupTasks", .strings(cgroupTasks)),
        (
          "environment",
          .object(JSONObject(environment.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) }))
        ),
      ]))
  }

  public init(
    moduleID: String, library: String, entryPoint: String, isSwift: Bool, sandbox: String,
    granted: Set<Capability>, serves: DefaultModuleRole? = nil, calls: Set<DefaultModuleRole> = [],
    policy: ConfinementPolicy, parent: Int32, environment: [String: String] = [:],
    protocolVersion: Int = ProtocolVersion.current
  ) {
    self.environment = environment
    self.serves = serves
    self.calls = calls
    self.protocolVersion = protocolVersion
    self.moduleID = moduleID
    self.library = library
    self.entryPoint = entryPoint
    self.isSwift = isSwift
    self.sandbox = sandbox
    self.granted = granted
    self.policy = policy
    self.parent = parent
  }

  public init?(json text: String) {
    guard let value = try? JSONParser.parse(text) else { return nil }
    self.init(parsed: value)
  }

  /// The configuration a parsed `configure` payload describes, if it is one.
  public init?(parsed value: JSONValue) {
    guard let o = value.objectValue, let id = o["moduleID"]?.stringValue,
      let lib = o["library"]?.stringValue, let entry = o["entryPoint"]?.stringValue,
      let sandbox = o["sandbox"]?.stringValue,
      let parent = o["parent"]?.integerValue.flatMap(Int32.init(exactly:))
    else { return nil }
    func strings(_ k: String) -> [String] { o[k]?.arrayValue?.compactMap(\.stringValue) ?? [] }
    func num(_ k: String) -> UInt64? { o["limits"]?.objectValue?[k]?.integerValue.map { UInt64(max(0, $0)) } }
    var environment: [String: String] = [:]
    for (k, v) in o["environment"]?.objectValue?.members ?? [] {
      guard let value = v.stringValue else { return nil }
      environment[k] = value
    }
    var limits = ResourceLimits()
    limits.memoryBytes = num("memoryBytes")
    limits.cpuSeconds = num("cpuSeconds")
    limits.openFiles = num("openFiles")
    limits.fileSizeBytes = num("fileSizeBytes")
    limits.temporaryBytes = num("temporaryBytes")
    self.init(
      moduleID: id, library: lib, entryPoint: entry, isSwift: o["isSwift"]?.boolValue ?? false,
      sandbox: sandbox,
      granted: Set(strings("granted").compactMap(Capability.init(rawValue:))),
      serves: o["serves"]?.stringValue.flatMap(DefaultModuleRole.init(rawValue:)),
      calls: Set(strings("calls").compactMap(DefaultModuleRole.init(rawValue:))),
      policy: ConfinementPolicy(
        readExecute: strings("readExecute"), readWrite: strings("readWrite"),
        networking: o["networking"]?.boolValue ?? false,
        limits: limits, memoryAccounted: o["memoryAccounted"]?.boolValue ?? false,
        networkNamespace: o["networkNamespace"]?.boolValue ?? false,
        temporaryDirectory: o["temporaryDirectory"]?.stringValue),
      parent: parent, environment: environment, protocolVersion: o[ProtocolVersion.member]?.integerValue ?? 0)
    cgroupTasks = strings("cgroupTasks")
  }
}
