import ForsettiCore

/// The JSON forms of gate results: the one builder every verb and every control answer uses.
public enum TraceJSON {
  /// One gate step: its verdict, reason code and the inputs that decided it (`detail`).
  public static func entry(_ e: GateEntry) -> JSONValue { TraceStep(e).json }

  /// A module's verdict with its whole trace.
  public static func judgement(_ j: ModuleJudgement) -> JSONValue {
    .object(
      JSONObject([
        ("file", .string(j.file)), ("moduleID", .string(orNull: j.moduleID)),
        ("verdict", .string(j.passed ? "pass" : "blocked")), ("reason", .string(orNull: j.reason?.rawValue)),
        ("trace", .array(j.trace.entries.map(entry))),
      ]))
  }
}
