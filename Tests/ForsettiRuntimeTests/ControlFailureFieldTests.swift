import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

@testable import ForsettiRuntime

/// Every failure the control answers give for bad requests and bad files names the request's
/// field (or the host's setting) at fault and the offending value, and its message names fields
/// as the request does: the host answers the debug page and applications too, for whom a
/// command line's flag is wrong.
@Suite struct ControlFailureFieldTests {
  let dir = TemporaryDirectory("control-failure-fields")

  init() throws {
    try dir.write(
      "manifests/service.json",
      ModuleFixture(moduleID: "com.test.service", entryPoint: "e").manifest(capabilities: ["storage", "api"]))
    var ui = ModuleFixture(moduleID: "com.test.ui", entryPoint: "u")
    ui.type = "ui"
    try dir.write("manifests/ui.json", ui.manifest())
  }

  /// What one bad input must give.
  struct Expected: CustomStringConvertible {
    var what: String
    var code: ControlFailure.Code
    var field: ControlFailure.Field
    /// nil: the value is not checked (a path the store chose).
    var value: String?
    var description: String { what }
  }

  func answerer(_ change: (inout HostConfiguration) -> Void = { _ in }) -> ControlAnswerer {
    var c = HostConfiguration(manifestsDirectory: dir.url("manifests"), stateDirectory: dir.url("state"))
    change(&c)
    return ControlAnswerer(files: Judge(c))
  }

  func order(
    _ action: OverrideOrder.Action, from: String? = nil, until: String? = nil, persisted: Bool = false,
    windows: Bool = false, inMemory: Bool = false
  ) -> ControlCommand {
    .override(
      OverrideOrder(
        channel: .module, id: "com.test.service", action: action, from: from, until: until,
        persisted: persisted,
        windows: windows, inMemory: inMemory))
  }

  /// The failure of `command`, checked against `expected`; nil (and an issue) if it was answered.
  @discardableResult
  func failure(_ command: ControlCommand, _ expected: Expected, by a: ControlAnswerer? = nil)
    -> ControlFailure?
  {
    do {
      _ = try (a ?? answerer()).compute(command)
      Issue.record("\(expected): answered")
      return nil
    } catch {
      #expect(error.code == expected.code, "\(expected): \(error.code) \(error.message)")
      #expect(
        error.field == expected.field, "\(expected): \(String(describing: error.field)) \(error.message)")
      if let value = expected.value { #expect(error.value == value, "\(expected): \(error.value ?? "nil")") }
      #expect(error.value != nil, "\(expected): no value")
      #expect(!Self.namesAFlag(error.message), "\(expected): \(error.message)")
      return error
    }
  }

  /// Whether `text` holds `--` followed by a letter: a command line's option.
  static func namesAFlag(_ text: String) -> Bool {
    text.firstRange(of: /--[A-Za-z]/) != nil
  }

  @Test func badRequestsNameTheirFieldAndValue() throws {
    // Not revoke: it reads no manifest, so an absent module is no failure of it.
    let absent = "com.test.absent"
    for command in [
      ControlCommand.explain(module: absent), .approve(module: absent, capabilities: nil),
      .enable(module: absent), .disable(module: absent),
      .select(module: absent),
    ] {
      let f = failure(
        command, Expected(what: "\(command.verb) \(absent)", code: .notFound, field: .module, value: absent))
      // Where it looked is said as the configuration names it.
      #expect(
        f?.message.hasPrefix("manifestsDirectory \(dir.url("manifests")): ") == true, "\(f?.message ?? "")")
    }
    failure(
      .select(module: "com.test.service"),
      Expected(what: "select a service", code: .refused, field: .module, value: "com.test.service"))
    failure(
      .approve(module: "com.test.service", capabilities: [.networking, .telemetry]),
      Expected(
        what: "approve what is not requested", code: .usage, field: .capabilities,
        value: "networking,telemetry"))

    let cases: [(ControlCommand, Expected)] = [
      (
        order(.on, windows: true),
        Expected(what: "on with windows", code: .usage, field: .windows, value: "true")
      ),
      (
        order(.off, persisted: true),
        Expected(what: "off with persisted", code: .usage, field: .persisted, value: "true")
      ),
      (
        order(.on, from: "2030-01-01T00:00:00Z", inMemory: true),
        Expected(what: "in memory with from", code: .usage, field: .from, value: "2030-01-01T00:00:00Z")
      ),
      (
        order(.clear, windows: true, inMemory: true),
        Expected(what: "in memory with windows", code: .usage, field: .windows, value: "true")
      ),
      (
        order(.on, from: "next week"),
        Expected(what: "from not an instant", code: .usage, field: .from, value: "next week")
      ),
      (
        order(.off, until: "soon"),
        Expected(what: "until not an instant", code: .usage, field: .until, value: "soon")
      ),
      (
        order(.on, from: "2030-01-01T00:00:00Z", until: "2029-01-01T00:00:00Z"),
        Expected(what: "until before from", code: .usage, field: .until, value: "2029-01-01T00:00:00Z")
      ),
      (
        order(.on, inMemory: true),
        Expected(
          what: "in memory with no host", code: .failed, field: .stateDirectory, value: dir.url("state"))
      ),
      (
        .reload(module: "com.test.service"),
        Expected(what: "reload with no host", code: .failed, field: .stateDirectory, value: dir.url("state"))
      ),
    ]
    for (command, expected) in cases { failure(command, expected) }
    #expect(!FileManager.default.fileExists(atPath: dir.url("state/overrides.json")), "a refused order wrote")
  }

  /// The windows already stored refuse a new one by its bounds, without naming a flag even
  /// where they say how to clear the one in the way.
  @Test func windowsInTheWayNameTheBound() throws {
    let (a, b) = ("2030-01-01T00:00:00Z", "2031-01-01T00:00:00Z")
    _ = try answerer().compute(order(.on, from: a, until: b))
    failure(
      order(.on, from: a, until: b), Expected(what: "the same window", code: .usage, field: .from, value: a))
    let overlap = failure(
      order(.off, from: "2030-06-01T00:00:00Z"),
      Expected(what: "an overlapping window", code: .usage, field: .from, value: "2030-06-01T00:00:00Z"))
    #expect(overlap?.message.contains("clear that window first (clear from \(a) until \(b))") == true)
    failure(
      order(.clear, until: "2032-01-01T00:00:00Z"),
      Expected(what: "clear a window not there", code: .usage, field: .until, value: "2032-01-01T00:00:00Z"))
  }

  /// A state file that cannot be read names the state directory, the file as its value.
  @Test func unreadableStateFilesNameTheStateDirectory() throws {
    let state = dir.url("state")
    func broken(_ name: String, _ text: String = "{") throws -> Expected {
      try dir.write("state/\(name)", text)
      return Expected(what: name, code: .failed, field: .stateDirectory, value: "\(state)/\(name)")
    }
    var e = try broken("overrides.json")
    failure(order(.on), e)
    failure(.overrideList, e)
    e = try broken("approvals.json")
    failure(.approve(module: "com.test.service", capabilities: nil), e)
    failure(.list, e)
    e = try broken("activation.json", #"{"version":1,"enabled":["a",3]}"#)
    failure(.enable(module: "com.test.service"), e)
    e = try broken(RuntimeStateFile.runtimeName)
    failure(.status, e)
    e = try broken(RuntimeStateFile.surfaceName)
    failure(.surface, e)
    e = try broken(RuntimeStateFile.surfaceName, #"{"pid":"x"}"#)
    failure(.surface, e)
  }

  /// A setting that leads nowhere is named by the configuration's field, its path the value.
  @Test func settingsLeadingNowhereAreNamed() throws {
    let missing = dir.url("missing")
    failure(
      .list, Expected(what: "manifests", code: .failed, field: .manifestsDirectory, value: missing),
      by: answerer { $0.manifestsDirectory = missing })
    failure(
      .enable(module: "com.test.service"),
      Expected(what: "manifests, enabling", code: .failed, field: .manifestsDirectory, value: missing),
      by: answerer { $0.manifestsDirectory = missing })
    failure(
      .list, Expected(what: "entitlements", code: .failed, field: .entitlementsFile, value: missing),
      by: answerer { $0.entitlementsFile = missing })
    failure(
      .explain(module: "com.test.service"),
      Expected(what: "policy", code: .failed, field: .policyFile, value: missing),
      by: answerer { $0.policyFile = missing })
  }

  /// A host's refusal of a malformed request names the field when it is one of a request.
  @Test func malformedRequestsNameTheirField() {
    #expect(ControlError.field("from", "must be a string, not number").failure.field == .from)
    #expect(ControlError.field("none", "must be true or false, not string").failure.field == .selectNone)
    // A member the client made up, or a setting sent as if it were a field, is not a field.
    #expect(ControlError.field("manifests", "is not a field of list").failure.field == nil)
    #expect(ControlError.field("stateDirectory", "is not a field of list").failure.field == nil)
    #expect(
      ControlError.unknownVerb("rm").failure
        == ControlFailure(.usage, ControlError.unknownVerb("rm").description))
  }
}
