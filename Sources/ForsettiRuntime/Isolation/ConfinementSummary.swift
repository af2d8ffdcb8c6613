import ForsettiCore

extension ModuleManager {
  /// The one-line summary of a worker's `confined` frame, for the load step of the trace.
  static func describeConfinement(_ json: String) -> String {
    guard let o = (try? JSONParser.parse(json))?.objectValue else { return "confinement unknown" }
    var parts: [String] = []
    if let abi = o["landlockABI"]?.integerValue {
      parts.append("landlock ABI \(abi)" + (o["signalsScoped"] == .bool(true) ? ", signals scoped" : ""))
    } else {
      parts.append("NO landlock")
    }
    parts.append(o["seccomp"] == .bool(true) ? "seccomp" : "NO seccomp")
    if let n = o["threadsBeforeConfinement"]?.integerValue, n > 1 {
      parts.append("WARNING: \(n) threads before confinement")
    }
    return "confined: " + parts.joined(separator: ", ")
  }
}
