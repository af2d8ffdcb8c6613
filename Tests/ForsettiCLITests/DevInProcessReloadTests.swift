import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

/// `forsetti-host dev --in-process`: reloads load each build from a sealed memory copy, and a
/// host killed in the middle of a reload leaves `runtime.json` whole, as the round before wrote
/// it.
@Suite(.onTestThreads, .serialized) struct DevInProcessReloadTests {
  let dir = TemporaryDirectory("dev-in-process")

  func replace(_ f: ModuleFixture) throws {
    let tmp = try f.build(in: dir, as: "staging/\(UUID().uuidString).so")
    #expect(rename(tmp, dir.url("plugins/hot.so")) == 0)
  }

  @Test func aHostKilledByANewVersionLeavesTheStateFileOfTheRoundBefore() throws {
    try DevCommandTests.hot("v1").install(in: dir, name: "hot")
    let host = try DevHost([
      "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state", dir.url("state"),
      "--approve-all", "--in-process", "--debounce", "0",
    ])
    defer { host.stop() }
    #expect(host.await("for changes") != nil, "\(host.lines)")
    #expect(host.await("start v1") != nil, "\(host.lines)")

    // A reload in-process carries the state to the new build, loaded from memory.
    try replace(DevCommandTests.hot("v2"))
    #expect(host.await("reloaded, 1 bytes of state carried") != nil, "\(host.lines)")
    #expect(host.await("v2 generation 1") != nil, "\(host.lines)")
    #expect(!FileManager.default.fileExists(atPath: dir.url("state/versions")))

    // A build whose start crashes takes an in-process host down in the middle of its reload.
    try replace(DevCommandTests.hot("v3", start: "volatile int *p = NULL; *p = 1; return FORSETTI_OK;"))
    let end = Date().addingTimeInterval(60)
    while host.process.isRunning && Date() < end { usleep(10_000) }
    try #require(!host.process.isRunning, "the host survived a crash in start: \(host.lines)")
    #expect(host.process.terminationReason == .uncaughtSignal)

    // What it published is whole and is the last round it finished: v2 started, by that host.
    let text = try String(contentsOfFile: dir.url("state/runtime.json"), encoding: .utf8)
    let root = try #require(try JSONParser.parse(Array(text.utf8)).objectValue, "\(text)")
    #expect(root["pid"]?.integerValue == Int(host.process.processIdentifier), "\(text)")
    let hot = root["modules"]?.arrayValue?.compactMap { (v: JSONValue) in v.objectValue }.first {
      $0["moduleID"]?.stringValue == "com.test.hot"
    }
    #expect(hot?["state"]?.stringValue == "started", "\(text)")
    let leftovers = try FileManager.default.contentsOfDirectory(atPath: dir.url("state"))
      .filter { $0.contains(".tmp-") }
    #expect(leftovers.isEmpty, "\(leftovers)")
  }
}
