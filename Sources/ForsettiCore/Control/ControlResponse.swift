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
      o["error"] = f.json
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
    return ControlFailure.decode(o["error"]).map {
      ControlResponse(pid: pid, stateDirectory: state, outcome: .failed($0))
    }
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
