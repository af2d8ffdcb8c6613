import ForsettiCore
import Foundation
import Testing

/// The control protocol's typed requests, decoded once at the boundary: every verb round-trips,
/// and a field missing, of the wrong type or not the verb's is refused naming the field.
@Suite struct ControlRequestTests {
  static func decode(_ request: String) -> Result<ControlRequest, ControlError> {
    ControlRequest.decode(Array(#"{"protocol":2,"request":\#(request)}"#.utf8))
  }

  static let every: [ControlCommand] = [
    .status, .list, .explain(module: "com.x"), .surface, .approve(module: "com.x", capabilities: nil),
    .approve(module: "com.x", capabilities: [.storage, .networking]),
    .revoke(module: "com.x", capabilities: [.storage]),
    .override(OverrideOrder(channel: .module, id: "com.x", action: .on, inMemory: true)),
    .override(
      OverrideOrder(channel: .product, id: "pro", action: .off, from: "2027-01-01T00:00:00Z", until: nil)),
    .override(OverrideOrder(channel: .module, id: "com.x", action: .clear, windows: true)), .overrideList,
    .enable(module: "com.x"), .disable(module: "com.x"), .select(module: "com.ui"), .select(module: nil),
    .reload(module: "com.x"), .upgrade,
  ]

  @Test(arguments: every) func everyVerbRoundTrips(_ command: ControlCommand) {
    let request = ControlRequest(command)
    #expect(ControlRequest.decode(Array(request.line.dropLast())) == .success(request))
    #expect(ControlRequest.verbs.contains(request.verb))
  }

  @Test func theVerbsAreTheTwelveOfTheProtocol() {
    #expect(
      ControlRequest.verbs == [
        "status", "list", "explain", "surface", "approve", "revoke", "override", "enable", "disable",
        "select", "reload", "upgrade",
      ])
    #expect(Set(Self.every.map(\.verb)) == ControlRequest.verbs)
  }

  /// The table declares each verb once: every command's fields are its verb's, a field of the
  /// table no other verb's, and `writes` follows the table (but for `override list`).
  @Test(arguments: every) func eachCommandIsItsVerbsDeclaration(_ command: ControlCommand) throws {
    let verb = try #require(ControlVerb.named(command.verb))
    let fields = Set(command.json.objectValue?.members.map(\.key) ?? []).subtracting(["verb"])
    #expect(fields.isSubset(of: verb.fields), "\(command.verb): \(fields) beyond \(verb.fields)")
    #expect(command.writes == (verb.writes && command != .overrideList))
    // A field of another verb is refused by name.
    for other in ControlVerb.all.flatMap(\.fields) where !verb.fields.contains(other) {
      var request = command.json.objectValue ?? JSONObject()
      request[other] = .string("x")
      guard case .failure(let e) = ControlCommand.decode(.object(request)) else {
        Issue.record("\(command.verb) took \(other)")
        continue
      }
      #expect("\(e)".contains(other), "\(e)")
    }
  }

  @Test func aFieldOfTheWrongTypeIsRefusedByName() {
    #expect(
      Self.decode(#"{"verb":"explain","module":7}"#)
        == .failure(.field("module", "must be a string, not number")))
    #expect(
      Self.decode(#"{"verb":"override","action":"on","channel":"module","id":"x","inMemory":"yes"}"#)
        == .failure(.field("inMemory", "must be true or false, not string")))
    #expect(
      Self.decode(#"{"verb":"approve","module":"x","capabilities":"storage"}"#)
        == .failure(.field("capabilities", "must be an array of at most 64 capability names")))
    guard
      case .failure(.field("capabilities", let why)) = Self.decode(
        #"{"verb":"approve","module":"x","capabilities":["root"]}"#)
    else {
      Issue.record("an unknown capability passed")
      return
    }
    #expect(why.contains("'root'"))
  }

  @Test func aFieldTheVerbDoesNotTakeIsRefusedByName() {
    #expect(
      Self.decode(#"{"verb":"list","manifests":"/etc"}"#)
        == .failure(.field("manifests", "is not a field of list")))
    #expect(
      Self.decode(#"{"verb":"status","module":"x"}"#)
        == .failure(.field("module", "is not a field of status")))
    #expect(
      ControlRequest.decode(Array(#"{"protocol":2,"request":{"verb":"list"},"arguments":[]}"#.utf8))
        == .failure(.field("arguments", "is not a field of a request (it has \"protocol\" and \"request\")")))
    #expect(Self.decode(#"{"verb":"explain"}"#) == .failure(.field("module", "is missing")))
    #expect(Self.decode(#"{"verb":"select","module":"x","none":true}"#).isFailure)
    #expect(Self.decode(#"{"verb":"override","action":"toggle","channel":"module","id":"x"}"#).isFailure)
    #expect(Self.decode(#"{"verb":"rm"}"#) == .failure(.unknownVerb("rm")))
    // Positive control: the same shapes, right, pass.
    #expect(Self.decode(#"{"verb":"list"}"#) == .success(ControlRequest(.list)))
    #expect(Self.decode(#"{"verb":"select","none":true}"#) == .success(ControlRequest(.select(module: nil))))
  }

  @Test func aProtocolOneLineIsRefusedNamingProtocolTwo() {
    let old = ControlRequest.decode(Array(#"{"protocol":1,"verb":"list","arguments":["--json"]}"#.utf8))
    #expect(old == .failure(.version(1)))
    guard case .failure(let e) = old else { return }
    #expect(e.description.contains("protocol 2") && e.code == .usage, "\(e)")
  }

  @Test func anAnswerAndARefusalRoundTrip() {
    let answered = ControlResponse(
      pid: 7, stateDirectory: "/s",
      outcome: .answered(["running": true], changes: [ModuleChange(moduleID: "com.x", state: "started")]))
    #expect(ControlResponse.decode(Array(answered.line.dropLast())) == .success(answered))
    let refused = ControlResponse(
      pid: 7, stateDirectory: "/s", outcome: .failed(ControlFailure(.notFound, "no")))
    #expect(ControlResponse.decode(Array(refused.line.dropLast())) == .success(refused))
    #expect(refused.isBusy == false)
    let busy = ControlResponse(pid: 7, stateDirectory: "/s", outcome: .failed(ControlFailure(.busy, "later")))
    #expect(busy.isBusy)
  }

  /// The list answer is one model: built by the runtime, decoded by the client, the same.
  @Test func aListAnswerRoundTripsAndRefusesAWrongMemberByName() {
    let list = ListAnswer(
      modules: [
        ModuleVerdict(
          moduleID: "com.x", file: "x.json", displayName: nil, version: "1.0.0", type: "service",
          passed: true,
          reason: nil,
          override: DecidingOverride(
            channel: "module", provider: "in-memory", state: "on",
            summary: "module override on from in-memory"),
          runState: "started", runReason: nil, health: .null,
          trace: [
            TraceStep(
              step: "entitlement", verdict: "pass", reason: nil, detail: "module override on from in-memory")
          ])
      ], host: RunHost(pid: 42, running: true), inMemoryKnown: true, healthKnown: true)
    #expect(ListAnswer.decode(list.json) == .success(list))
    guard case .object(var o) = list.json else { return }
    o["healthKnown"] = .string("yes")
    #expect(ListAnswer.decode(.object(o)) == .failure(.field("healthKnown", "must be true or false")))
  }

  @Test func anExplainAnswerRoundTrips() {
    let verdict = ModuleVerdict(
      moduleID: "com.x", file: "x.json", displayName: "X", version: "1.0.0", type: "service", passed: false,
      reason: "moduleLocked", override: nil, runState: nil, runReason: nil, health: .null,
      trace: [TraceStep(step: "entitlement", verdict: "fail", reason: "moduleLocked", detail: "not unlocked")]
    )
    let x = ExplainAnswer(
      verdict: verdict, runFrom: nil, isolation: "landlock", inMemoryKnown: false, healthKnown: false,
      entitlement: ["unlocked": false], approval: .null, licences: ["a.licence"],
      signatures: ["required": false],
      libraries: .null)
    #expect(ExplainAnswer.decode(x.json) == .success(x))
    #expect(x.json.objectValue?["healthNote"] == .string(ListAnswer.healthUnknown))
  }

  /// The fuzzer's dictionary names every field and verb the decoder takes, so a new field is
  /// fuzzed the day it is declared.
  @Test func theFuzzDictionaryHasEveryVerbAndField() throws {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    let text = try String(
      contentsOf: url.appendingPathComponent("Fuzz/Dictionaries/control.dict"), encoding: .utf8)
    var words = Set(ControlRequest.verbs)
    for command in Self.every {
      for (key, _) in command.json.objectValue?.members ?? [] { words.insert(key) }
    }
    for word in words { #expect(text.contains(#"="\"\#(word)\"""#), "\(word)") }
  }
}

extension Result {
  fileprivate var isFailure: Bool {
    if case .failure = self { return true }
    return false
  }
}
