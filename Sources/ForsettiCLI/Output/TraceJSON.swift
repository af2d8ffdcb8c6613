import ForsettiCore

/// The JSON forms of gate results, shared by every verb that prints them.
enum TraceJSON {
  static func entry(_ e: GateEntry) -> JSONValue {
    .object(
      JSONObject([
        ("step", .string(e.step.rawValue)), ("verdict", .string(e.verdict.rawValue)),
        ("reason", .string(orNull: e.reason?.rawValue)), ("detail", .string(e.detail)),
      ]))
  }

  static func judgement(_ j: ModuleJudgement) -> JSONValue {
    .object(
      JSONObject([
        ("file", .string(j.file)), ("moduleID", .string(orNull: j.moduleID)),
        ("verdict", .string(j.passed ? "pass" : "blocked")), ("reason", .string(orNull: j.reason?.rawValue)),
        ("trace", .array(j.trace.entries.map(entry))),
      ]))
  }
}
