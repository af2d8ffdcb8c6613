import ForsettiCore

/// The `status` answer: whether a host runs on the state directory, and how many of its modules
/// are in each state.
enum StatusAnswer {
  static func live(_ records: [ModuleRecord], state: String, pid: Int32) -> JSONValue {
    var counts: [String: Int] = [:]
    for r in records { counts[r.state.name, default: 0] += 1 }
    return .object(
      JSONObject([
        ("running", .bool(true)), ("pid", .number(String(pid))), ("state", .string(state)),
        ("modules", .object(JSONObject(counts.keys.sorted().map { ($0, .number(String(counts[$0] ?? 0))) }))),
      ]))
  }

  static func files(_ view: ControlView) -> JSONValue {
    var o = JSONObject([("running", .bool(false)), ("state", .string(view.stateDirectory))])
    o["lastPID"] = view.run.map { .number(String($0.pid)) } ?? .null
    return .object(o)
  }
}
