import ForsettiCore
import Foundation
import Testing

/// A host's failure on the wire: its field and offending value travel with its code and
/// message, a forged one of the wrong type is refused, and a client names the fields its own way.
@Suite struct ControlFailureTests {
  static func refusal(_ error: String) -> [UInt8] {
    Array(#"{"protocol":2,"host":{"pid":7,"state":"/s"},"ok":false,"error":\#(error)}"#.utf8)
  }

  static func line(_ f: ControlFailure) -> [UInt8] {
    Array(ControlResponse(pid: 7, stateDirectory: "/s", outcome: .failed(f)).line.dropLast())
  }

  @Test func fieldAndValueRoundTrip() throws {
    var failures = ControlFailure.Field.allCases.map {
      ControlFailure(.usage, "about \($0.rawValue)", field: $0, value: "v \($0.rawValue) 'q' \u{1b}")
    }
    failures.append(ControlFailure(.busy, "later"))
    failures.append(ControlFailure(.failed, "a field without its value", field: .windows))
    failures.append(ControlFailure(.failed, "a value without its field", value: "x"))
    for f in failures {
      let decoded = ControlResponse.decode(Self.line(f))
      #expect(decoded == .success(ControlResponse(pid: 7, stateDirectory: "/s", outcome: .failed(f))), "\(f)")
    }
    // The members are the request's names, and absent when there is nothing to say.
    let error = try #require(
      try JSONParser.parse(Self.line(.invalid(.inMemory, "yes", why: "no"))).objectValue?["error"]?
        .objectValue)
    #expect(error.members.map(\.key) == ["code", "message", "field", "value"])
    #expect(error["field"] == .string("inMemory") && error["value"] == .string("yes"))
    let bare = try #require(try JSONParser.parse(Self.line(ControlFailure(.busy, "later"))).objectValue)
    #expect(bare["error"]?.objectValue?.members.map(\.key) == ["code", "message"])
    #expect(ControlFailure.Field.selectNone.rawValue == "none")
  }

  @Test func aForgedFieldOrValueOfTheWrongTypeIsRefused() {
    for member in [#""field":7"#, #""field":null"#, #""field":["from"]"#, #""field":{"name":"from"}"#] {
      let r = ControlResponse.decode(Self.refusal(#"{"code":"usage","message":"m",\#(member)}"#))
      #expect(r == .failure(.malformed("a refusal whose field is not a string")), "\(member)")
    }
    for member in [#""value":7"#, #""value":false"#, #""value":null"#] {
      let r = ControlResponse.decode(
        Self.refusal(#"{"code":"usage","message":"m","field":"from",\#(member)}"#))
      #expect(r == .failure(.malformed("a refusal whose value is not a string")), "\(member)")
    }
    #expect(
      ControlResponse.decode(Self.refusal(#"{"code":"usage","field":"from"}"#))
        == .failure(.malformed("a refusal without error code and message")))
    // A field a newer host names is none here; its message still says what is wrong.
    let newer = ControlResponse.decode(
      Self.refusal(#"{"code":"usage","message":"m","field":"quota","value":"9"}"#))
    #expect(
      newer == .success(.init(pid: 7, stateDirectory: "/s", outcome: .failed(.init(.usage, "m", value: "9"))))
    )
  }

  /// The two forms a message names a field in are renamed for a client; any other text is not.
  @Test func aClientNamesTheFieldsItsOwnWay() {
    let flag: (ControlFailure.Field) -> String = { "--" + $0.rawValue }
    let invalid = ControlFailure.invalid(.from, "next week", why: "expected an instant")
    #expect(invalid.message == "invalid value 'next week' for 'from': expected an instant")
    #expect(invalid.message(naming: flag) == "invalid value 'next week' for '--from': expected an instant")
    let located = ControlFailure.located(.failed, .stateDirectory, "/s/a.json", "cannot be read")
    #expect(located.field == .stateDirectory && located.value == "/s/a.json")
    #expect(located.message(naming: flag) == "--stateDirectory /s/a.json: cannot be read")
    // About the request's module, said where the host looked: the setting is renamed too.
    let absent = ControlFailure.located(
      .notFound, .manifestsDirectory, "m", "no manifest declares module x", field: .module, value: "x")
    #expect(absent.field == .module && absent.value == "x")
    #expect(absent.message(naming: flag) == "--manifestsDirectory m: no manifest declares module x")
    for untouched in [
      ControlFailure(.usage, "\"windows\" goes only with action clear", field: .windows, value: "true"),
      ControlFailure(.usage, "invalid value 'a' for 'until': x", field: .from, value: "a"),
      ControlFailure(.busy, "stateDirectoryish text"),
    ] {
      #expect(untouched.message(naming: flag) == untouched.message, "\(untouched)")
    }
  }

  /// Every field of every verb is a field a failure can name, and every field of the request a
  /// failure can name is a verb's: the two lists cannot drift apart.
  @Test func theFieldsAreTheRequestsAndTheSettings() {
    let requestFields = Set(ControlVerb.all.flatMap(\.fields))
    let named = Set(ControlFailure.Field.allCases.filter { !$0.isSetting }.map(\.rawValue))
    #expect(named == requestFields)
    #expect(
      Set(ControlFailure.Field.allCases.filter(\.isSetting).map(\.rawValue))
        == ["stateDirectory", "manifestsDirectory", "policyFile", "entitlementsFile"])
  }

  @Test func theFuzzDictionaryHasTheFailuresMembers() throws {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    let text = try String(
      contentsOf: url.appendingPathComponent("Fuzz/Dictionaries/control.dict"), encoding: .utf8)
    for word in ["field", "value"] + ControlFailure.Field.allCases.map(\.rawValue) {
      #expect(text.contains(#"="\"\#(word)\"""#), "\(word)")
    }
  }
}
