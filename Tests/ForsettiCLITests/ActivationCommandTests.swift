import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

/// `enable`, `disable` and `select` through the real binary: what they write to
/// STATE/activation.json, what they print, and what they refuse.
@Suite(.onTestThreads) struct ActivationCommandTests {
  let dir = TemporaryDirectory("activation")

  var state: String { dir.url("state") }
  var file: String { state + "/activation.json" }

  /// Writes a manifest (no binary: the verbs judge nothing, they only need the declaration).
  func declare(_ id: String, _ type: String) throws {
    var f = ModuleFixture(moduleID: id, entryPoint: "entry_\(id.replacingOccurrences(of: ".", with: "_"))")
    f.type = type
    try dir.write("manifests/\(id).json", f.manifest())
  }

  func host(_ args: [String]) throws -> ProcessResult {
    try HostBinary.run(args + ["--manifests", dir.url("manifests"), "--state", state])
  }

  func content() throws -> String { try String(contentsOfFile: file, encoding: .utf8) }

  func saved() throws -> ActivationState {
    try ActivationState.decode(JSONParser.parse(content())).get()
  }

  func declareThree() throws {
    try declare("com.test.service", "service")
    try declare("com.test.ui", "ui")
    try declare("com.test.app", "app")
  }

  @Test func eachVerbWritesTheFileAndSaysSo() throws {
    try declareThree()
    let enable = try host(["enable", "com.test.service"])
    #expect(enable.status == 0, "\(enable.stderr)")
    #expect(enable.stdout == "enabled com.test.service; a running host applies this at once\n")
    #expect(
      try content() == """
        {
          "version": 1,
          "enabled": [
            "com.test.service"
          ],
          "disabled": [],
          "ui": "automatic"
        }

        """)

    let select = try host(["select", "com.test.ui"])
    #expect(select.stdout == "selected com.test.ui as the UI module; a running host applies this at once\n")
    #expect(
      try saved()
        == ActivationState(enabled: ["com.test.service", "com.test.ui"], ui: .module("com.test.ui")))

    // Disabling the selected module drops the selection.
    let disable = try host(["disable", "com.test.ui"])
    #expect(disable.stdout == "disabled com.test.ui; a running host applies this at once\n")
    #expect(
      try saved() == ActivationState(enabled: ["com.test.service"], disabled: ["com.test.ui"], ui: .automatic)
    )

    let app = try host(["select", "com.test.app"])
    #expect(app.status == 0)
    #expect(try saved().ui == .module("com.test.app"))

    let none = try host(["select", "--none"])
    #expect(none.stdout == "no UI module selected; a running host applies this at once\n")
    #expect(
      try saved()
        == ActivationState(
          enabled: ["com.test.app", "com.test.service"], disabled: ["com.test.ui"], ui: .none))

    // Enabling a disabled module moves it; doing it twice changes nothing.
    #expect(try host(["enable", "com.test.ui"]).status == 0)
    #expect(try host(["enable", "com.test.ui"]).status == 0)
    #expect(
      try saved() == ActivationState(enabled: ["com.test.app", "com.test.service", "com.test.ui"], ui: .none))
  }

  @Test func jsonPrintsTheResultingState() throws {
    try declareThree()
    let r = try host(["select", "com.test.app", "--json"])
    #expect(r.status == 0)
    #expect(
      r.stdout == #"{"version":1,"enabled":["com.test.app"],"disabled":[],"ui":{"selected":"com.test.app"}}"#
        + "\n")
    let d = try host(["disable", "com.test.service", "--json"])
    let printed = try ActivationState.decode(JSONParser.parse(d.stdout)).get()
    #expect(
      printed
        == ActivationState(
          enabled: ["com.test.app"], disabled: ["com.test.service"], ui: .module("com.test.app")))
    #expect(try saved() == printed)
  }

  @Test func anUndeclaredModuleIsRefusedWithTheClosestID() throws {
    try declareThree()
    for verb in ["enable", "disable", "select"] {
      let r = try host([verb, "com.test.uj"])
      #expect(r.status == 2)
      #expect(
        r.stderr.contains("no manifest declares module com.test.uj; did you mean 'com.test.ui'?"),
        "\(r.stderr)")
    }
    #expect(!FileManager.default.fileExists(atPath: file))
  }

  @Test func selectIsForVisualModulesAndTakesOneOfIDOrNone() throws {
    try declareThree()
    let service = try host(["select", "com.test.service"])
    #expect(service.status == 2)
    #expect(
      service.stderr.contains(
        "select is for ui and app modules; com.test.service is a service module; enable it instead"))
    let neither = try host(["select"])
    #expect(neither.status == 2)
    #expect(neither.stderr.contains("missing argument MODULE_ID (or --none)"))
    #expect(neither.stderr.contains("hint: see 'forsetti-host select --help'"))
    let both = try host(["select", "com.test.ui", "--none"])
    #expect(both.status == 2)
    #expect(both.stderr.contains("give a MODULE_ID or --none, not both"))
    #expect(!FileManager.default.fileExists(atPath: file))
  }

  @Test func aMalformedFileIsNamedAndLeftAlone() throws {
    try declareThree()
    let cases: [(String, String)] = [
      (#"{"version":1,"enabled":["a",3]}"#, "enabled[1]: expected a non-empty module ID string, found 3"),
      (#"{"version":2}"#, "version: expected 1, found 2"),
      (#"{"version":1,"ui":"auto"}"#, "ui: expected"),
      ("{", "invalid JSON"),
    ]
    for (text, why) in cases {
      try dir.write("state/activation.json", text)
      let r = try host(["enable", "com.test.ui"])
      #expect(r.status == 2)
      #expect(r.stderr.contains("--state \(file): \(why)"), "\(r.stderr)")
      #expect(try content() == text)
    }
    try FileManager.default.removeItem(atPath: file)
    try FileManager.default.createDirectory(atPath: file, withIntermediateDirectories: true)
    let unreadable = try host(["disable", "com.test.ui"])
    #expect(unreadable.status == 2)
    #expect(
      unreadable.stderr.contains("--state \(file): cannot be read: Is a directory"), "\(unreadable.stderr)")
  }

  @Test func helpTellsWhatTheFileHoldsAndHowTheHostUsesIt() throws {
    let overview = try HostBinary.run(["--help"])
    for verb in ["enable", "disable", "select"] { #expect(overview.stdout.contains("\n  \(verb) ")) }
    for verb in ["enable", "disable", "select"] {
      let help = try HostBinary.run([verb, "--help"])
      #expect(help.status == 0)
      for phrase in [
        "STATE/activation.json", "With no file every eligible module is enabled",
        "first UI or app module by module ID",
        "`run --default-policy deny` runs a free module",
        "A running host applies a change at once", "EXIT STATUS", "--manifests DIR", "--state DIR", "--json",
      ] {
        #expect(help.stdout.contains(phrase), "\(verb) --help lacks \(phrase)")
      }
    }
    #expect(try HostBinary.run(["select", "--help"]).stdout.contains("--none"))
  }

  @Test func concurrentCommandsNeverLoseAChange() throws {
    let ids = (0..<20).map { "com.test.m\($0)" }
    for id in ids { try declare(id, "service") }
    var processes: [Process] = []
    for id in ids {
      let p = Process()
      p.executableURL = URL(fileURLWithPath: HostBinary.path)
      p.arguments = ["enable", id, "--manifests", dir.url("manifests"), "--state", state]
      p.standardOutput = FileHandle.nullDevice
      p.standardError = FileHandle.nullDevice
      processes.append(p)
    }
    for p in processes { try p.run() }
    for p in processes { p.waitUntilExit() }
    #expect(processes.allSatisfy { $0.terminationStatus == 0 })
    #expect(try saved().enabled == Set(ids))
  }
}
