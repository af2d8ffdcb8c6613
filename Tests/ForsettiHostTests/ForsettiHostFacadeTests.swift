import ForsettiHost
import ForsettiTestSupport
import Foundation
import Synchronization
import Testing

/// The facade as an application drives it, in-process with a real module: one host per state
/// directory, observers, a stop requested from another thread, a deadline, the order of calls.
@Suite(.onTestThreads) struct ForsettiHostFacadeTests {
  let dir = TemporaryDirectory("facade")

  init() throws {
    var f = ModuleFixture(moduleID: "com.test.facade", entryPoint: "facade_entry")
    f.start = "fixture_log(\"hello from facade\"); return FORSETTI_OK;"
    try f.install(in: dir, capabilities: [])
  }

  var configuration: ForsettiHost.Configuration {
    var c = ForsettiHost.Configuration(
      manifestsDirectory: dir.url("manifests"), pluginDirectories: [dir.url("plugins")],
      stateDirectory: dir.url("state"))
    c.isolation = nil
    c.judging.approveAll = true
    return c
  }

  @Test func aHostRunsUntilAnotherThreadAsksItToStopAndThenReleasesItsDirectory() throws {
    let host = try ForsettiHost(configuration)
    let seen = Mutex<[String]>([])
    host.observe { change in
      if case .module(let r) = change { seen.withLock { $0.append("\(r.moduleID ?? r.file) \(r.state)") } }
    }
    #expect(host.call(role: .api, method: "m", request: []).status == FORSETTI_ERR_UNAVAILABLE)
    try host.start()
    #expect(host.modules.map(\.state) == [.started])
    #expect(seen.withLock { $0 } == ["com.test.facade started"])
    let socket = try #require(host.controlSocketPath)
    #expect(FileManager.default.fileExists(atPath: socket))
    // One host per state directory while this one runs.
    let second = #expect(throws: ForsettiHostError.self) { try ForsettiHost(configuration) }
    #expect(
      second.map { if case .stateDirectoryLocked = $0 { true } else { false } } == true,
      "\(String(describing: second))")
    let service = try ApplicationService(id: "com.test.late.v1", capability: .api) { _ in
      ApplicationServiceReply(status: FORSETTI_OK, response: [])
    }
    let late = #expect(throws: ForsettiHostError.self) { try host.register(service) }
    #expect(late?.description == "register cannot be called on a host that is started")

    let asker = Thread { host.requestStop() }
    asker.start()
    #expect(host.run(handlingSignals: false) == .stopRequested)
    host.stop()
    #expect(host.modules.map(\.state) == [.stopped])
    #expect(!FileManager.default.fileExists(atPath: socket))
    // Released: another host takes the directory (the control of the refusal above).
    let next = try ForsettiHost(configuration)
    next.stop()
  }

  @Test func runReturnsAtItsDeadlineAndAStoppedHostCannotStartAgain() throws {
    let host = try ForsettiHost(configuration)
    try host.start()
    #expect(host.run(until: .now + .milliseconds(100), handlingSignals: false) == .deadline)
    host.stop()
    #expect(host.run(handlingSignals: false) == .stopRequested)
    let again = #expect(throws: ForsettiHostError.self) { try host.start() }
    #expect(again?.description == "start cannot be called on a host that is stopped")
  }
}
