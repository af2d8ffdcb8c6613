/// The `reload` answer: whether the module (and the consumers restarted with it) reloaded, one
/// report per module with its line and, when it did not reload, the steps that say why.
public struct ReloadAnswer: ControlAnswerDocument {
  /// One module's outcome.
  public struct Report: Sendable, Equatable {
    public var moduleID: String
    /// The line `dev` prints for it.
    public var line: String
    /// The gate steps that were not skipped, when it did not reload; empty when it did.
    public var trace: [TraceStep]

    public init(moduleID: String, line: String, trace: [TraceStep]) {
      self.moduleID = moduleID
      self.line = line
      self.trace = trace
    }
  }

  public var module: String
  public var reloaded: Bool
  public var reports: [Report]

  public init(module: String, reloaded: Bool, reports: [Report]) {
    self.module = module
    self.reloaded = reloaded
    self.reports = reports
  }

  public var json: JSONValue {
    .object(
      JSONObject([
        ("module", .string(module)), ("reloaded", .bool(reloaded)),
        (
          "reports",
          .array(
            reports.map { r in
              .object(
                JSONObject([
                  ("moduleID", .string(r.moduleID)), ("line", .string(r.line)),
                  ("trace", .array(r.trace.map(\.json))),
                ]))
            })
        ),
      ]))
  }

  public static func decode(_ value: JSONValue) -> Result<ReloadAnswer, ControlError> {
    do throws(ControlError) {
      let o = try AnswerFields(value, "reload answer")
      guard let items = o.value("reports")?.arrayValue else { throw .field("reports", "must be an array") }
      let reports = try items.map { (item) throws(ControlError) -> Report in
        let r = try AnswerFields(item, "reload report")
        guard let steps = r.value("trace")?.arrayValue else { throw .field("trace", "must be an array") }
        return Report(
          moduleID: try r.string("moduleID"), line: try r.string("line"),
          trace: try steps.map { (s) throws(ControlError) in try TraceStep.read(s) })
      }
      return .success(
        ReloadAnswer(module: try o.string("module"), reloaded: try o.bool("reloaded"), reports: reports))
    } catch {
      return .failure(error)
    }
  }
}
