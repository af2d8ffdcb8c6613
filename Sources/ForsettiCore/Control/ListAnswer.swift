/// The `list` answer: every module's verdict by the answering host's own judge (its in-memory
/// overrides included), with the whole gate trace, the override that decided its entitlement,
/// its run state and the health it reported. Built once in the runtime; the command line decodes
/// it to render its table, and prints `json` for `--json`.
public struct ListAnswer: Sendable, Equatable {
  public var modules: [ModuleVerdict]
  /// The host whose run states are shown; nil when none has published any.
  public var host: RunHost?
  /// Whether the in-memory overrides were the answering host's (false on the files).
  public var inMemoryKnown: Bool
  /// Whether a running host answered, so the modules' reports are known.
  public var healthKnown: Bool
  /// What the verdicts were judged with that is not the files as they are now, each in words
  /// naming the file (an invalid policy file, the last valid one in force).
  public var problems: [String] = []

  /// What `healthNote` says when no running host answers.
  public static let healthUnknown = "no running host: health unknown"

  /// A list answer of these parts.
  public init(modules: [ModuleVerdict], host: RunHost?, inMemoryKnown: Bool, healthKnown: Bool) {
    self.modules = modules
    self.host = host
    self.inMemoryKnown = inMemoryKnown
    self.healthKnown = healthKnown
  }

  /// Whether every module passed (`list` exits 0, else 1).
  public var allPass: Bool { modules.allSatisfy(\.passed) }

  /// The answer document (`list --json`).
  public var json: JSONValue {
    var root = JSONObject([("modules", .array(modules.map(\.json)))])
    root["host"] = host?.json ?? .null
    root["inMemoryKnown"] = .bool(inMemoryKnown)
    root["healthKnown"] = .bool(healthKnown)
    if !healthKnown { root["healthNote"] = .string(Self.healthUnknown) }
    if !problems.isEmpty { root["problems"] = .strings(problems) }
    return .object(root)
  }

  /// Reads a host's list answer; a member missing or of the wrong type is refused by name.
  public static func decode(_ value: JSONValue) -> Result<ListAnswer, ControlError> {
    do throws(ControlError) {
      let o = try AnswerFields(value, "list answer")
      let modules = try o.array("modules").map { (v) throws(ControlError) in try ModuleVerdict.read(v) }
      let host = try o.optionalObject("host").map { (h) throws(ControlError) in try RunHost.read(h) }
      var answer = ListAnswer(
        modules: modules, host: host, inMemoryKnown: try o.bool("inMemoryKnown"),
        healthKnown: try o.bool("healthKnown"))
      answer.problems = try o.optionalStrings("problems")
      return .success(answer)
    } catch {
      return .failure(error)
    }
  }
}

/// The host whose run states an answer shows: its pid, and whether it still runs.
public struct RunHost: Sendable, Equatable {
  public var pid: Int32
  public var running: Bool

  /// The host `pid`, running or not.
  public init(pid: Int32, running: Bool) {
    self.pid = pid
    self.running = running
  }

  /// How a verb names where the states come from.
  public var label: String {
    running ? "running host (pid \(pid))" : "last run (pid \(pid), no longer running)"
  }

  var json: JSONValue { .object(JSONObject([("pid", .number(String(pid))), ("running", .bool(running))])) }

  static func read(_ value: JSONValue) throws(ControlError) -> RunHost {
    let o = try AnswerFields(value, "host")
    guard let pid = Int32(exactly: try o.integer("pid")) else { throw .field("pid", "is not a process ID") }
    return RunHost(pid: pid, running: try o.bool("running"))
  }
}

/// One module in a list answer.
public struct ModuleVerdict: Sendable, Equatable {
  public var moduleID: String?
  public var file: String
  public var displayName: String?
  public var version: String?
  public var type: String?
  public var passed: Bool
  /// The reason code of the step that blocked it.
  public var reason: String?
  /// The override that decided its entitlement; nil when none did.
  public var override: DecidingOverride?
  public var runState: String?
  public var runReason: String?
  /// The module's own report (its words, not checked by the host); null when none or unknown.
  public var health: JSONValue
  public var trace: [TraceStep]
  /// The version the answering host runs, when it is not `version` (the manifest's now): the
  /// files were upgraded (or a new build rolled back) and a reload is pending.
  public var runningVersion: String?
  /// Where its newest kept crash happened (`CrashReport.summary`: "SIGSEGV at 0x0, address not
  /// mapped, in parse_header (packet.c:41) ← …"), and when (seconds since the epoch); nil
  /// when none is kept. `explain` and `crashes` have the whole report.
  public var lastCrash: String?
  public var lastCrashTime: Int64?

  /// A verdict of these parts.
  public init(
    moduleID: String?, file: String, displayName: String?, version: String?, type: String?, passed: Bool,
    reason: String?, override: DecidingOverride?, runState: String?, runReason: String?, health: JSONValue,
    trace: [TraceStep]
  ) {
    self.moduleID = moduleID
    self.file = file
    self.displayName = displayName
    self.version = version
    self.type = type
    self.passed = passed
    self.reason = reason
    self.override = override
    self.runState = runState
    self.runReason = runReason
    self.health = health
    self.trace = trace
  }

  var json: JSONValue {
    .object(
      JSONObject([
        ("moduleID", .string(orNull: moduleID)), ("file", .string(file)),
        ("displayName", .string(orNull: displayName)), ("version", .string(orNull: version)),
        ("type", .string(orNull: type)), ("verdict", .string(passed ? "pass" : "blocked")),
        ("reason", .string(orNull: reason)), ("override", override?.json ?? .null),
        ("runState", .string(orNull: runState)), ("runReason", .string(orNull: runReason)),
        ("health", health), ("trace", .array(trace.map(\.json))),
        ("runningVersion", .string(orNull: runningVersion)), ("lastCrash", .string(orNull: lastCrash)),
        ("lastCrashTime", lastCrashTime.map { .number(String($0)) } ?? .null),
      ]))
  }

  static func read(_ value: JSONValue) throws(ControlError) -> ModuleVerdict {
    let o = try AnswerFields(value, "module")
    let said = try o.string("verdict")
    guard said == "pass" || said == "blocked" else {
      throw .field("verdict", "must be pass or blocked")
    }
    var verdict = ModuleVerdict(
      moduleID: try o.optionalString("moduleID"), file: try o.string("file"),
      displayName: try o.optionalString("displayName"), version: try o.optionalString("version"),
      type: try o.optionalString("type"), passed: said == "pass", reason: try o.optionalString("reason"),
      override: try o.optionalObject("override").map { (v) throws(ControlError) in
        try DecidingOverride.read(v)
      },
      runState: try o.optionalString("runState"), runReason: try o.optionalString("runReason"),
      health: o.value("health") ?? .null,
      trace: try o.array("trace").map { (v) throws(ControlError) in try TraceStep.read(v) })
    verdict.runningVersion = try o.optionalString("runningVersion")
    verdict.lastCrash = try o.optionalString("lastCrash")
    verdict.lastCrashTime = o.value("lastCrashTime")?.integerValue.map(Int64.init)
    return verdict
  }
}

/// The override that decided a module's entitlement: `module override on from in-memory`.
public struct DecidingOverride: Sendable, Equatable {
  /// `module` or `product`.
  public var channel: String
  /// `persisted`, `in-memory` or `time-frame`.
  public var provider: String
  public var state: String
  public var summary: String

  /// An override of `channel` from `provider`, deciding `state`.
  public init(channel: String, provider: String, state: String, summary: String) {
    self.channel = channel
    self.provider = provider
    self.state = state
    self.summary = summary
  }

  /// The override as an answer shows it.
  public var json: JSONValue {
    .object(
      JSONObject([
        ("channel", .string(channel)), ("provider", .string(provider)), ("state", .string(state)),
        ("summary", .string(summary)),
      ]))
  }

  static func read(_ value: JSONValue) throws(ControlError) -> DecidingOverride {
    let o = try AnswerFields(value, "override")
    return DecidingOverride(
      channel: try o.string("channel"), provider: try o.string("provider"), state: try o.string("state"),
      summary: try o.string("summary"))
  }
}

/// One gate step of a trace: its verdict, reason code, and the inputs that decided it.
public struct TraceStep: Sendable, Equatable {
  public var step: String
  /// `pass`, `fail` or `skipped`.
  public var verdict: String
  public var reason: String?
  public var detail: String

  /// A step of these parts.
  public init(step: String, verdict: String, reason: String?, detail: String) {
    self.step = step
    self.verdict = verdict
    self.reason = reason
    self.detail = detail
  }

  /// A step of a gate trace.
  public init(_ e: GateEntry) {
    self.init(
      step: e.step.rawValue, verdict: e.verdict.rawValue, reason: e.reason?.rawValue, detail: e.detail)
  }

  /// The step as every answer and `--json` shows it.
  public var json: JSONValue {
    .object(
      JSONObject([
        ("step", .string(step)), ("verdict", .string(verdict)), ("reason", .string(orNull: reason)),
        ("detail", .string(detail)),
      ]))
  }

  /// Reads a step of an answer.
  public static func read(_ value: JSONValue) throws(ControlError) -> TraceStep {
    let o = try AnswerFields(value, "trace step")
    return TraceStep(
      step: try o.string("step"), verdict: try o.string("verdict"), reason: try o.optionalString("reason"),
      detail: try o.string("detail"))
  }
}

/// The members of an answer object, read by type; a member missing or of the wrong type is
/// refused by name. An answer comes from a host the client checked, so members it does not know
/// are let be (a newer host may add some).
struct AnswerFields {
  private let object: JSONObject

  init(_ value: JSONValue, _ what: String) throws(ControlError) {
    guard let o = value.objectValue else { throw .field(what, "must be an object") }
    object = o
  }

  func value(_ name: String) -> JSONValue? { object[name] }

  func optionalString(_ name: String) throws(ControlError) -> String? {
    guard let v = object[name], v != .null else { return nil }
    guard let s = v.stringValue else { throw .field(name, "must be a string, not \(v.typeName)") }
    return s
  }

  func string(_ name: String) throws(ControlError) -> String {
    guard let s = try optionalString(name) else { throw .field(name, "is missing") }
    return s
  }

  func bool(_ name: String) throws(ControlError) -> Bool {
    guard let v = object[name], let b = v.boolValue else { throw .field(name, "must be true or false") }
    return b
  }

  func integer(_ name: String) throws(ControlError) -> Int {
    guard let v = object[name], let i = v.integerValue else { throw .field(name, "must be an integer") }
    return i
  }

  /// The strings of member `name`; none when it is absent.
  func optionalStrings(_ name: String) throws(ControlError) -> [String] {
    guard let v = object[name], !v.isNull else { return [] }
    guard let items = v.arrayValue else { throw .field(name, "must be an array of strings") }
    return try items.map { (item) throws(ControlError) -> String in
      guard let s = item.stringValue else { throw .field(name, "must hold strings") }
      return s
    }
  }

  func array(_ name: String) throws(ControlError) -> [JSONValue] {
    guard let v = object[name], let a = v.arrayValue else { throw .field(name, "must be an array") }
    return a
  }

  func optionalObject(_ name: String) throws(ControlError) -> JSONValue? {
    guard let v = object[name], v != .null else { return nil }
    guard v.objectValue != nil else { throw .field(name, "must be an object, not \(v.typeName)") }
    return v
  }
}
