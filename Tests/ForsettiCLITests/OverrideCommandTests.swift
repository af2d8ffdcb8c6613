import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

/// `forsetti-host override` through the real binary: the persisted state, several windows per
/// ID, clearing parts, `override list`, the refusals, and what `explain` then says.
@Suite(.onTestThreads) struct OverrideCommandTests {
  let dir = TemporaryDirectory("override-cli")
  var state: String { dir.url("state") }
  var file: String { state + "/overrides.json" }

  func override(_ args: [String]) throws -> ProcessResult {
    try HostBinary.run(["override"] + args + ["--state", state])
  }

  func stored() throws -> String { try String(contentsOfFile: file, encoding: .utf8) }

  func json(_ r: ProcessResult) throws -> JSONObject {
    try #require(try JSONParser.parse(r.stdout).objectValue)
  }

  let past = ["--from", "2001-01-01T00:00:00Z", "--until", "2002-01-01T00:00:00Z"]
  let always = ["--from", "2002-01-01T00:00:00Z", "--until", "2999-01-01T00:00:00Z"]

  @Test func windowsAddUpAndListShowsEachWithWhetherItIsInEffect() throws {
    var r = try override(["module", "com.test.app", "on"] + past)
    #expect(r.status == 0, "\(r.stderr)")
    #expect(
      r.stdout.contains(
        "module com.test.app: window on from 2001-01-01T00:00:00Z until 2002-01-01T00:00:00Z added"))
    r = try override(["module", "com.test.app", "off"] + always)
    #expect(r.status == 0, "\(r.stderr)")
    #expect(
      r.stdout.contains(
        "stored now: windows: on from 2001-01-01T00:00:00Z until 2002-01-01T00:00:00Z, off from 2002-01-01T00:00:00Z until 2999-01-01T00:00:00Z"
      ), "\(r.stdout)")
    #expect(try override(["product", "com.vendor.pro", "on"]).status == 0)

    r = try override(["list"])
    #expect(r.status == 0, "\(r.stderr)")
    #expect(
      r.stdout.contains("time-frame: on from 2001-01-01T00:00:00Z until 2002-01-01T00:00:00Z (ended)"),
      "\(r.stdout)")
    #expect(
      r.stdout.contains("time-frame: off from 2002-01-01T00:00:00Z until 2999-01-01T00:00:00Z (in effect)"))
    #expect(r.stdout.contains("now: off, decided by time-frame"))
    #expect(
      r.stdout.contains(
        "com.vendor.pro\n    persisted:  on\n    time-frame: none\n    now: on, decided by persisted\n"),
      "\(r.stdout)")
    #expect(r.stdout.contains("in-memory: only a running host has them"))

    let list = try json(try override(["list", "--json"]))
    #expect(list["inMemoryKnown"] == false)
    let app = try #require(list["modules"]?.objectValue?["com.test.app"]?.objectValue)
    #expect(app["persisted"] == .null)
    #expect(app["windows"]?.arrayValue?.map { $0.objectValue?["inEffect"] } == [false, true])
    #expect(app["windows"]?.arrayValue?.map { $0.objectValue?["status"] } == ["ended", "inEffect"])
    #expect(app["now"] == .object(JSONObject([("state", "off"), ("provider", "time-frame")])))
    #expect(list["products"]?.objectValue?["com.vendor.pro"]?.objectValue?["persisted"] == "on")
  }

  @Test func explainNamesTheWindowThatDecidesAndThePersistedStateComesFirst() throws {
    let f = ModuleFixture(moduleID: "com.test.app", entryPoint: "app_entry")
    try dir.write("manifests/app.json", f.manifest())
    func explain() throws -> JSONValue? {
      let r = try HostBinary.run([
        "explain", "com.test.app", "--manifests", dir.url("manifests"), "--state", state, "--json",
      ])
      return try JSONParser.parse(r.stdout).objectValue?["entitlement"]?.objectValue?["decidedBy"]
    }
    #expect(try override(["module", "com.test.app", "on"] + past).status == 0)
    #expect(try explain() == "free")
    #expect(try override(["module", "com.test.app", "off"] + always).status == 0)
    #expect(try explain() == "moduleOverride:time-frame")
    let r = try override(["module", "com.test.app", "on"])
    #expect(r.stdout.contains("note: the persisted on decides before any window"), "\(r.stdout)")
    #expect(try explain() == "moduleOverride:persisted")
    #expect(try override(["module", "com.test.app", "clear", "--persisted"]).status == 0)
    #expect(try explain() == "moduleOverride:time-frame")
  }

  @Test func clearTakesThePersistedStateTheWindowsOneWindowOrEverything() throws {
    #expect(try override(["module", "com.a", "off"]).status == 0)
    #expect(try override(["module", "com.a", "on"] + past).status == 0)
    #expect(try override(["module", "com.a", "on"] + always).status == 0)

    var r = try override(["module", "com.a", "clear", "--persisted"])
    #expect(r.stdout.contains("module com.a: persisted off cleared"), "\(r.stdout)")
    #expect(r.stdout.contains("stored now: windows: on from 2001"))
    r = try override(["module", "com.a", "clear"] + past)
    #expect(
      r.stdout.contains("1 window from 2001-01-01T00:00:00Z until 2002-01-01T00:00:00Z cleared"),
      "\(r.stdout)")
    #expect(r.stdout.contains("stored now: windows: on from 2002-01-01T00:00:00Z until 2999-01-01T00:00:00Z"))
    #expect(try override(["module", "com.a", "off"]).status == 0)
    r = try override(["module", "com.a", "clear", "--windows"])
    #expect(r.stdout.contains("1 window cleared\n  stored now: persisted off"), "\(r.stdout)")
    #expect(try override(["module", "com.a", "on"] + past).status == 0)
    r = try override(["module", "com.a", "clear", "--json"])
    #expect(try json(r)["persisted"] == .null)
    #expect(try json(r)["windows"] == .array([]))
    #expect(try json(r)["done"] == "persisted off and 1 window cleared")
    #expect(try !stored().contains("com.a"))
    r = try override(["module", "com.a", "clear"])
    #expect(r.status == 0)
    #expect(r.stdout.contains("nothing to clear"))
  }

  @Test func everyFormHasAJSONShape() throws {
    var o = try json(try override(["product", "com.p", "on", "--json"]))
    #expect(o["channel"] == "product")
    #expect(o["id"] == "com.p")
    #expect(o["action"] == "set")
    #expect(o["state"] == "on")
    #expect(o["changed"] == .bool(true))
    #expect(o["persisted"] == "on")
    o = try json(try override(["product", "com.p", "on", "--json"]))
    #expect(o["changed"] == .bool(false))

    o = try json(try override(["product", "com.p", "off", "--json"] + always))
    #expect(o["action"] == "addWindow")
    #expect(o["window"]?.objectValue?["state"] == "off")
    #expect(o["window"]?.objectValue?["from"] == "2002-01-01T00:00:00Z")
    #expect(o["windows"]?.arrayValue?.count == 1)
    // The persisted state decides first: said in the JSON too.
    #expect(o["note"]?.stringValue?.contains("clear --persisted") == true, "\(o)")

    o = try json(try override(["product", "com.p", "clear", "--json"] + always))
    #expect(o["action"] == "clear")
    #expect(o["clearedWindows"]?.arrayValue?.count == 1)
    #expect(o["clearedPersisted"] == .null)
    #expect(o["windows"] == .array([]))

    o = try json(try override(["product", "com.p", "clear", "--json"]))
    #expect(o["clearedPersisted"] == "on")
    #expect(o["persisted"] == .null)
    #expect(o["note"] == .null)

    let list = try json(try override(["list", "--json"]))
    #expect(list["inMemoryKnown"] == .bool(false))
    // Cleared of everything, the ID is no longer listed.
    #expect(list["products"] == .object(JSONObject()))
  }

  @Test func refusedChangesSayWhyAndLeaveTheFileAsItWas() throws {
    #expect(try override(["module", "com.a", "on"] + always).status == 0)
    let before = try stored()
    let refusals: [([String], String)] = [
      // The same window, its start written in another zone.
      (
        ["module", "com.a", "on", "--from", "2002-01-01T01:00:00+01:00", "--until", "2999-01-01T00:00:00Z"],
        "already has the window on from 2002-01-01T00:00:00Z until 2999-01-01T00:00:00Z"
      ),
      (
        ["module", "com.a", "on", "--from", "2030-01-01T00:00:00Z", "--until", "2030-01-01T00:00:00Z"],
        "expected an instant after --from 2030-01-01T00:00:00Z"
      ),
      (
        ["module", "com.a", "off", "--from", "2500-01-01T00:00:00Z"],
        "overlaps the window on from 2002-01-01T00:00:00Z until 2999-01-01T00:00:00Z of module com.a"
      ),
      (["module", "com.a", "on", "--until", "next week"], "expected an ISO 8601 instant"),
      (["module", "com.a", "clear"] + past, "module com.a has no window from 2001-01-01T00:00:00Z"),
      (["module", "com.a", "on", "--windows"], "unexpected argument '--windows'"),
      (["module", "com.a", "maybe"], "expected on, off or clear"),
      (["channel", "com.a", "on"], "expected module, product or list"),
      (["module", "com.a"], "missing argument on|off|clear"),
      (["list", "com.a"], "unexpected argument 'com.a'"),
      (["list", "--persisted"], "unexpected argument '--persisted'"),
    ]
    for (args, message) in refusals {
      let r = try override(args)
      #expect(r.status == 2, "\(args)")
      #expect(r.stderr.contains(message), "\(args): \(r.stderr)")
      #expect(try stored() == before, "\(args)")
    }
    // An off window that does not overlap is fine.
    #expect(try override(["module", "com.a", "off", "--from", "2999-01-01T00:00:00Z"]).status == 0)
  }

  @Test func aVersion1FileIsReadAndAChangeWritesVersion2() throws {
    try dir.write(
      "state/overrides.json",
      #"{"version":1,"modules":{"com.a":{"state":"on","from":"2001-01-01T00:00:00Z","until":"2002-01-01T00:00:00Z"}},"products":{"p":{"state":"off"}}}"#
    )
    var r = try override(["list"])
    #expect(
      r.stdout.contains("time-frame: on from 2001-01-01T00:00:00Z until 2002-01-01T00:00:00Z (ended)"),
      "\(r.stdout)")
    #expect(r.stdout.contains("p\n    persisted:  off"))
    r = try override(["module", "com.a", "on"] + always)
    #expect(
      r.stdout.contains(
        "stored now: windows: on from 2001-01-01T00:00:00Z until 2002-01-01T00:00:00Z, on from 2002"),
      "\(r.stdout)")
    let doc = try #require(try JSONParser.parse(try stored()).objectValue)
    #expect(doc["version"] == 2)
    #expect(doc["modules"]?.objectValue?["com.a"]?.objectValue?["windows"]?.arrayValue?.count == 2)
    #expect(doc["products"]?.objectValue?["p"] == .object(JSONObject([("state", "off")])))
  }

  @Test func aMalformedFileIsAnErrorForEveryFormAndIsNotOverwritten() throws {
    let bad = #"{"version":2,"modules":{"com.a":{"windows":[{"state":"on","from":"tomorrow"}]}}}"#
    try dir.write("state/overrides.json", bad)
    for args in [["list"], ["module", "com.b", "on"], ["module", "com.a", "clear"]] {
      let r = try override(args)
      #expect(r.status == 2, "\(args)")
      #expect(r.stderr.contains("modules.com.a.windows[0].from: an ISO 8601 instant"), "\(args): \(r.stderr)")
    }
    #expect(try stored() == bad)
  }
}
