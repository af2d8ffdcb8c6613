import ForsettiCore

/// What confinement achieved in one worker: the model the worker sends in its `confined` frame
/// (`json`), the host reads back (`init(json:)`) and the trace shows (`description`), so the
/// three cannot drift apart.
public struct ConfinementReport: Sendable, Hashable, CustomStringConvertible {
  /// Every capability dropped (effective, permitted, inheritable, ambient; bounding unless noted
  /// in `missing`).
  public var capabilitiesDropped = false
  /// Namespaces entered: "user", "ipc", "uts", "net".
  public var namespaces: [String] = []
  /// The landlock ABI used, or nil when the kernel has none.
  public var landlockABI: Int?
  /// Whether landlock also scopes signals and abstract unix sockets (ABI 6+): the module can
  /// neither signal the host nor reach an abstract socket outside its own domain.
  public var signalsScoped = false
  public var seccomp = false
  /// Distinct system calls the seccomp filter refuses in all or some of their uses.
  public var seccompCalls = 0
  /// Whether memfd_create, memfd_secret and shmget are refused (no memory cgroup counts them).
  public var memoryBypassesRefused = false
  public var missing: [String] = []
  /// The size of the tmpfs at its `TMPDIR` (nil: none was mounted).
  public var temporaryBytes: UInt64?
  /// Threads of the process when confinement began: 1 unless something started one too early.
  public var threadsBefore = 1

  public init() {}

  /// The members of the `confined` frame's JSON (the worker adds its protocol version).
  public var json: [(String, JSONValue)] {
    [
      ("capabilitiesDropped", .bool(capabilitiesDropped)), ("namespaces", .strings(namespaces)),
      ("landlockABI", landlockABI.map { .number(String($0)) } ?? .null),
      ("signalsScoped", .bool(signalsScoped)),
      ("seccomp", .bool(seccomp)), ("seccompCalls", .number(String(seccompCalls))),
      ("memoryBypassesRefused", .bool(memoryBypassesRefused)), ("missing", .strings(missing)),
      ("threadsBeforeConfinement", .number(String(threadsBefore))),
      ("temporaryBytes", temporaryBytes.map { .number(String($0)) } ?? .null),
    ]
  }

  /// Reads what a worker sent; untrusted, so a member missing or of another type reads as the
  /// weaker claim (not dropped, not entered, none). Nil when it is not a JSON object.
  public init?(json text: String) {
    guard let o = (try? JSONParser.parse(text))?.objectValue else { return nil }
    capabilitiesDropped = o["capabilitiesDropped"] == .bool(true)
    namespaces = o["namespaces"]?.arrayValue?.compactMap(\.stringValue) ?? []
    landlockABI = o["landlockABI"]?.integerValue
    signalsScoped = o["signalsScoped"] == .bool(true)
    seccomp = o["seccomp"] == .bool(true)
    seccompCalls = o["seccompCalls"]?.integerValue ?? 0
    memoryBypassesRefused = o["memoryBypassesRefused"] == .bool(true)
    missing = o["missing"]?.arrayValue?.compactMap(\.stringValue) ?? []
    threadsBefore = o["threadsBeforeConfinement"]?.integerValue ?? 1
    temporaryBytes = o["temporaryBytes"]?.integerValue.flatMap { UInt64(exactly: $0) }
  }

  /// The one line for the trace's load step: "capabilities dropped, user+ipc+uts namespaces,
  /// seccomp deny-list (93 calls), memory counted by its cgroup, landlock ABI 7 (…)"; what is
  /// missing in capitals, so it stands out.
  public var description: String {
    var parts: [String] = []
    parts.append(capabilitiesDropped ? "capabilities dropped" : "capabilities KEPT")
    parts.append(namespaces.isEmpty ? "NO namespaces" : namespaces.joined(separator: "+") + " namespaces")
    parts.append(seccomp ? "seccomp deny-list (\(seccompCalls) calls)" : "NO seccomp")
    // memfds and SysV shm hold memory no address-space limit sees: refused, unless the
    // worker's cgroup counts them.
    parts.append(memoryBypassesRefused ? "memfd/shm refused" : "memory counted by its cgroup")
    parts.append(
      landlockABI.map { "landlock ABI \($0)" + (signalsScoped ? " (signals, abstract sockets scoped)" : "") }
        ?? "NO landlock")
    if let t = temporaryBytes { parts.append("TMPDIR a tmpfs of \(t >> 20) MiB") }
    if threadsBefore > 1 { parts.append("WARNING: \(threadsBefore) threads before confinement") }
    return parts.joined(separator: ", ")
      + (missing.isEmpty ? "" : "; missing: " + missing.joined(separator: "; "))
  }
}
