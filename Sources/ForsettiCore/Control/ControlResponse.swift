/// A running host's answer: the answer document of the verb and the module states it changed,
/// or why it could not be given.
public struct ControlResponse: Sendable, Equatable {
  /// The host that answered.
  public var pid: Int32
  public var stateDirectory: String
  public var outcome: Outcome

  /// What came of the request.
  public enum Outcome: Sendable, Equatable {
    /// The verb's answer (its schema is the verb's, docs/control.md) and the modules whose
    /// state the request changed, in the host's order.
    case answered(JSONValue, changes: [ModuleChange])
    case failed(ControlFailure)
  }

  /// The answer of the host `pid` on `stateDirectory`.
  public init(pid: Int32, stateDirectory: String, outcome: Outcome) {
    self.pid = pid
    self.stateDirectory = stateDirectory
    self.outcome = outcome
  }

  /// The failure, if the request was not answered.
  public var failure: ControlFailure? {
    if case .failed(let f) = outcome { return f }
    return nil
  }

  /// Whether the host said "not now": a client asks again.
  public var isBusy: Bool { failure?.code == .busy }

  /// The answer as one line.
  public var line: [UInt8] {
    var o = JSONObject([
      ("protocol", .number(String(ControlRequest.protocolVersion))),
      ("host", .object(JSONObject([("pid", .number(String(pid))), ("state", .string(stateDirectory))]))),
    ])
    switch outcome {
    case .answered(let answer, let changes):
      o["ok"] = .bool(true)
      o["answer"] = answer
      o["changes"] = .array(changes.map(\.json))
    case .failed(let f):
      o["ok"] = .bool(false)
      o["error"] = .object(JSONObject([("code", .string(f.code.rawValue)), ("message", .string(f.message))]))
    }
    return Array((JSONWriter.string(.object(o)) + "\n").utf8)
  }

  /// Reads a host's answer line.
  public static func decode(_ bytes: [UInt8]) -> Result<ControlResponse, ControlError> {
    guard let value = try? JSONParser.parse(bytes), let o = value.objectValue else {
      return .failure(.malformed("an answer that is not a JSON object"))
    }
    guard let version = o["protocol"]?.integerValue else { return .failure(.malformed("no \"protocol\"")) }
    guard version == ControlRequest.protocolVersion else { return .failure(.version(version)) }
    guard let host = o["host"]?.objectValue,
      let pid = host["pid"]?.integerValue.flatMap(Int32.init(exactly:)),
      let state = host["state"]?.stringValue, let ok = o["ok"]?.boolValue
    else { return .failure(.malformed("an answer without host and ok")) }
    if ok {
      guard let answer = o["answer"], let list = o["changes"]?.arrayValue else {
        return .failure(.malformed("an answer without answer and changes"))
      }
      var changes: [ModuleChange] = []
      for item in list {
        guard let c = ModuleChange(item) else {
          return .failure(.malformed("a change without moduleID and state"))
        }
        changes.append(c)
      }
      return .success(
        ControlResponse(pid: pid, stateDirectory: state, outcome: .answered(answer, changes: changes)))
    }
    guard let e = o["error"]?.objectValue, let raw = e["code"]?.stringValue,
      let message = e["message"]?.stringValue
    else { return .failure(.malformed("a refusal without error code and message")) }
    // A code this build does not know is a failure all the same.
    let code = ControlFailure.Code(rawValue: raw) ?? .failed
    return .success(
      ControlResponse(pid: pid, stateDirectory: state, outcome: .failed(ControlFailure(code, message))))
  }
}

/// A module whose state a request changed, and its state now.
public struct ModuleChange: Sendable, Equatable {
  public var moduleID: String
  /// The state's name (`started`, `blocked/moduleLocked`, …).
  public var state: String

  /// `moduleID` is now in `state`.
  public init(moduleID: String, state: String) {
    self.moduleID = moduleID
    self.state = state
  }

  init?(_ value: JSONValue) {
    guard let o = value.objectValue, let id = o["moduleID"]?.stringValue, let s = o["state"]?.stringValue
    else { return nil }
    self.init(moduleID: id, state: s)
  }

  var json: JSONValue { .object(JSONObject([("moduleID", .string(moduleID)), ("state", .string(state))])) }
}

/// Why the host did not answer a request: a code a client acts on, and one line for a person.
public struct ControlFailure: Error, Sendable, Equatable, CustomStringConvertible {
  /// What a client does about a failure: its exit status, whether it asks again.
  public enum Code: String, Sendable, CaseIterable {
    /// The request is malformed, or not what the verb takes (the command line's usage error).
    case usage
    /// No manifest declares the module, or nothing is there to act on.
    case notFound
    /// Not now: too many clients, or the host stopping; ask again.
    case busy
    /// The host will not do it (another user; a setting that forbids it).
    case refused
    /// It was tried and failed (a state file unreadable or unwritable, a module that would not
    /// reload); nothing was acknowledged.
    case failed
    /// The host did not serve the request in time.
    case timedOut
  }

  public var code: Code
  public var message: String

  /// A failure of `code`, told in `message` (one line, the offending value in it).
  public init(_ code: Code, _ message: String) {
    self.code = code
    self.message = message
  }

  public var description: String { message }
}
