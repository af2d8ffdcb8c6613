import ForsettiCore

/// The JSON forms of gate results: the one builder every verb and every control answer uses.
package enum TraceJSON {
  /// One gate step: its verdict, reason code and the inputs that decided it (`detail`).
  package static func entry(_ e: GateEntry) -> JSONValue { TraceStep(e).json }

  /// A module's verdict with its whole trace.
  package static func judgement(_ j: ModuleJudgement) -> JSONValue {
    .object(
      JSONObject([
        ("file", .string(j.file)), ("moduleID", .string(orNull: j.moduleID)),
        ("verdict", .string(j.passed ? "pass" : "blocked")), ("reason", .string(orNull: j.reason?.rawValue)),
        ("trace", .array(j.trace.entries.map(entry))),
      ]))
  }

  /// A module's verdict and, when blocked, the step that blocked it and why (`step`, `detail`;
  /// null when it passed): what `check --json` prints unless asked for the whole trace, whose
  /// pass lines are most of its bytes and of its cost.
  package static func verdict(_ j: ModuleJudgement) -> JSONValue {
    let failure = j.trace.firstFailure
    return .object(
      JSONObject([
        ("file", .string(j.file)), ("moduleID", .string(orNull: j.moduleID)),
        ("verdict", .string(failure == nil ? "pass" : "blocked")),
        ("reason", .string(orNull: failure?.reason?.rawValue)),
        ("step", .string(orNull: failure?.step.rawValue)), ("detail", .string(orNull: failure?.detail)),
      ]))
  }
}
