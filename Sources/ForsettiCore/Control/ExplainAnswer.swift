/// The `explain` answer: one module's verdict (as in `list`, with its whole trace and the
/// override that decided its entitlement), and the runtime's reports on its trust inputs, kept
/// as the documents their builders make (entitlement, approval, licences, signatures, libraries:
/// their schema is in docs/control.md).
public struct ExplainAnswer: Sendable, Equatable {
  public var verdict: ModuleVerdict
  /// Where `verdict.runState` comes from ("running host (pid N)"); nil with no run state.
  public var runFrom: String?
  /// The isolation this kernel offers a worker.
  public var isolation: String
  public var inMemoryKnown: Bool
  public var healthKnown: Bool
  /// The reports, each null when it does not apply (no manifest, no binary inspected).
  public var entitlement: JSONValue
  public var approval: JSONValue
  public var licences: [String]
  public var signatures: JSONValue
  public var libraries: JSONValue
  /// The role the module serves in the running host and its load (role, where, concurrency,
  /// queued, inFlight, busyTotal, timeoutsTotal); null when it serves none there.
  public var serving: JSONValue
  /// As `ListAnswer.problems`: what the verdict was judged with that is not the files as they are.
  public var problems: [String] = []
  /// The module's newest crash report kept under the state directory (`crashReport` in the
  /// answer; its schema is `CrashReport.json`), null when it has none.
  public var lastCrash: JSONValue = .null

  /// An explain answer of these parts.
  public init(
    verdict: ModuleVerdict, runFrom: String?, isolation: String, inMemoryKnown: Bool, healthKnown: Bool,
    entitlement: JSONValue, approval: JSONValue, licences: [String], signatures: JSONValue,
    libraries: JSONValue, serving: JSONValue = .null
  ) {
    self.verdict = verdict
    self.runFrom = runFrom
    self.isolation = isolation
    self.inMemoryKnown = inMemoryKnown
    self.healthKnown = healthKnown
    self.entitlement = entitlement
    self.approval = approval
    self.licences = licences
    self.signatures = signatures
    self.libraries = libraries
    self.serving = serving
  }

  /// The answer document (`explain --json`): the verdict's members, then the reports.
  public var json: JSONValue {
    var o = verdict.json.objectValue ?? JSONObject()
    o["entitlement"] = entitlement
    o["approval"] = approval
    o["licences"] = .strings(licences)
    o["signatures"] = signatures
    o["runFrom"] = .string(orNull: runFrom)
    o["isolation"] = .string(isolation)
    o["libraries"] = libraries
    o["serving"] = serving
    o["inMemoryKnown"] = .bool(inMemoryKnown)
    o["healthKnown"] = .bool(healthKnown)
    if !healthKnown { o["healthNote"] = .string(ListAnswer.healthUnknown) }
    if !problems.isEmpty { o["problems"] = .strings(problems) }
    o["crashReport"] = lastCrash
    return .object(o)
  }

  /// Reads a host's explain answer; a member missing or of the wrong type is refused by name.
  public static func decode(_ value: JSONValue) -> Result<ExplainAnswer, ControlError> {
    do throws(ControlError) {
      let o = try AnswerFields(value, "explain answer")
      var licences: [String] = []
      for item in try o.array("licences") {
        guard let s = item.stringValue else { throw .field("licences", "must hold strings") }
        licences.append(s)
      }
      var answer = ExplainAnswer(
        verdict: try ModuleVerdict.read(value), runFrom: try o.optionalString("runFrom"),
        isolation: try o.string("isolation"), inMemoryKnown: try o.bool("inMemoryKnown"),
        healthKnown: try o.bool("healthKnown"), entitlement: o.value("entitlement") ?? .null,
        approval: o.value("approval") ?? .null, licences: licences,
        signatures: o.value("signatures") ?? .null,
        libraries: o.value("libraries") ?? .null, serving: o.value("serving") ?? .null)
      answer.problems = try o.optionalStrings("problems")
      answer.lastCrash = o.value("crashReport") ?? .null
      return .success(answer)
    } catch {
      return .failure(error)
    }
  }
}
