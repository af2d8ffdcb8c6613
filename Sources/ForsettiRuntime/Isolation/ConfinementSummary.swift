import ForsettiCore

extension ModuleManager {
  /// The one-line summary of a worker's `confined` frame, for the load step of the trace:
  /// "confined: capabilities dropped, user+ipc+uts+net namespaces, seccomp deny-list (93 calls), …".
  static func describeConfinement(_ json: String) -> String {
    guard let o = (try? JSONParser.parse(json))?.objectValue else { return "confinement unknown" }
    var parts: [String] = []
    parts.append(o["capabilitiesDropped"] == .bool(true) ? "capabilities dropped" : "capabilities KEPT")
    let namespaces = o["namespaces"]?.arrayValue?.compactMap(\.stringValue) ?? []
    parts.append(namespaces.isEmpty ? "NO namespaces" : namespaces.joined(separator: "+") + " namespaces")
    if o["seccomp"] == .bool(true) {
      parts.append("seccomp deny-list" + (o["seccompCalls"]?.integerValue.map { " (\($0) calls)" } ?? ""))
    } else {
      parts.append("NO seccomp")
    }
    // memfds and SysV shm hold memory no address-space limit sees: refused, unless the
    // worker's cgroup counts them.
    parts.append(
      o["memoryBypassesRefused"] == .bool(true) ? "memfd/shm refused" : "memory counted by its cgroup")
    if let abi = o["landlockABI"]?.integerValue {
      parts.append(
        "landlock ABI \(abi)"
          + (o["signalsScoped"] == .bool(true) ? " (signals, abstract sockets scoped)" : ""))
    } else {
      parts.append("NO landlock")
    }
    if let n = o["threadsBeforeConfinement"]?.integerValue, n > 1 {
      parts.append("WARNING: \(n) threads before confinement")
    }
    let missing = o["missing"]?.arrayValue?.compactMap(\.stringValue) ?? []
    return "confined: " + parts.joined(separator: ", ")
      + (missing.isEmpty ? "" : "; missing: " + missing.joined(separator: "; "))
  }
}
