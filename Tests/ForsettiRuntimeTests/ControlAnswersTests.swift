import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

@testable import ForsettiRuntime

/// Every verb's answer computed in-process (`ControlAnswerer(files:)`, as the command line does
/// with no host), read back from its document as its type: each answer is a typed value both
/// ways, and what it says is what the files now hold.
@Suite struct ControlAnswersTests {
  let dir = TemporaryDirectory("control-answers")
  let answerer: ControlAnswerer

  init() throws {
    try dir.write(
      "manifests/service.json",
      ModuleFixture(moduleID: "com.test.service", entryPoint: "e").manifest(capabilities: ["storage", "api"]))
    var ui = ModuleFixture(moduleID: "com.test.ui", entryPoint: "u")
    ui.type = "ui"
    try dir.write("manifests/ui.json", ui.manifest())
    answerer = ControlAnswerer(
      files: Judge(
        HostConfiguration(manifestsDirectory: dir.url("manifests"), stateDirectory: dir.url("state"))))
  }

  /// The answer to `command`, which must be an `A` and read back as itself from its document.
  func answer<A: ControlAnswerDocument>(_ command: ControlCommand, as type: A.Type) throws -> A {
    let computed = try answerer.compute(command)
    let typed = try #require(computed as? A, "\(command.verb) answered \(Swift.type(of: computed))")
    #expect(A.decode(typed.json) == .success(typed), "\(command.verb) does not read back as itself")
    return typed
  }

  @Test func everyVerbAnswersItsTypeAndReadsBack() throws {
    let status = try answer(.status, as: StatusAnswer.self)
    #expect(!status.running && status.stateDirectory == dir.url("state"))
    let list = try answer(.list, as: ListAnswer.self)
    #expect(Set(list.modules.compactMap(\.moduleID)) == ["com.test.service", "com.test.ui"])
    let explain = try answer(.explain(module: "com.test.service"), as: ExplainAnswer.self)
    #expect(explain.verdict.moduleID == "com.test.service")
    let surface = try answer(.surface, as: SurfaceAnswer.self)
    #expect(surface.published == nil && !surface.running)

    let approved = try answer(
      .approve(module: "com.test.service", capabilities: nil), as: ApprovalAnswer.self)
    #expect(approved == ApprovalAnswer(moduleID: "com.test.service", approved: [.storage, .api]))
    let revoked = try answer(
      .revoke(module: "com.test.service", capabilities: [.api]), as: ApprovalAnswer.self)
    #expect(revoked.approved == [.storage])

    let disabled = try answer(.disable(module: "com.test.service"), as: ActivationAnswer.self)
    #expect(disabled.state.disabled == ["com.test.service"] && disabled.done == "disabled com.test.service")
    let enabled = try answer(.enable(module: "com.test.service"), as: ActivationAnswer.self)
    #expect(enabled.state.enabled == ["com.test.service"] && enabled.state.disabled.isEmpty)
    let selected = try answer(.select(module: "com.test.ui"), as: ActivationAnswer.self)
    #expect(selected.state.ui == .module("com.test.ui"))
    #expect(try answer(.select(module: nil), as: ActivationAnswer.self).state.ui == .none)

    let on = try answer(
      .override(OverrideOrder(channel: .module, id: "com.test.service", action: .on)), as: OverrideAnswer.self
    )
    #expect(on.change == .set(state: "on", changed: true) && on.stored?.persisted == "on")
    let window = try answer(
      .override(
        OverrideOrder(
          channel: .product, id: "com.test.pro", action: .off, from: "2030-01-01T00:00:00Z",
          until: "2030-02-01T00:00:00Z")), as: OverrideAnswer.self)
    #expect(
      window.change
        == .addWindow(
          OverrideWindowLine(state: "off", from: "2030-01-01T00:00:00Z", until: "2030-02-01T00:00:00Z")))
    let listing = try answer(.overrideList, as: OverrideListing.self)
    #expect(!listing.inMemoryKnown)
    #expect(listing.modules.map(\.id) == ["com.test.service"] && listing.modules.first?.now == "on")
    #expect(listing.products.first?.windows.first?.status == .notYet)
    let cleared = try answer(
      .override(OverrideOrder(channel: .module, id: "com.test.service", action: .clear)),
      as: OverrideAnswer.self)
    #expect(cleared.change == .clear(persisted: "on", windows: []) && cleared.stored?.text == "nothing")
  }

  /// What needs a running host is refused without one, naming why; a module no manifest
  /// declares is not found.
  @Test func whatNeedsAHostIsRefusedWithoutOne() throws {
    for command in [
      ControlCommand.reload(module: "com.test.service"),
      .override(OverrideOrder(channel: .module, id: "com.test.service", action: .on, inMemory: true)),
    ] {
      #expect(throws: ControlFailure.self) { try answerer.compute(command) }
    }
    do {
      _ = try answerer.compute(.explain(module: "com.test.absent"))
      Issue.record("an absent module was explained")
    } catch {
      #expect(error.code == .notFound, "\(error)")
    }
  }

  /// A document missing a member, or holding one of the wrong type, is refused naming it.
  @Test func aMalformedAnswerIsRefusedByMember() {
    let bad: [(JSONValue, String)] = [
      (.object(JSONObject([("moduleID", .string("m")), ("approved", .strings(["flight"]))])), "approved"),
      (.object(JSONObject([("module", .string("m")), ("reloaded", .bool(true))])), "reports"),
      (.object(JSONObject([("running", .bool(true)), ("pid", .string("x"))])), "pid"),
    ]
    func refused<A: ControlAnswerDocument>(_ type: A.Type, _ document: JSONValue, naming member: String) {
      guard case .failure(let e) = A.decode(document) else {
        Issue.record("\(A.self) accepted \(document)")
        return
      }
      #expect("\(e)".contains(member), "\(e)")
    }
    refused(ApprovalAnswer.self, bad[0].0, naming: bad[0].1)
    refused(ReloadAnswer.self, bad[1].0, naming: bad[1].1)
    refused(SurfaceAnswer.self, bad[2].0, naming: bad[2].1)
  }
}
