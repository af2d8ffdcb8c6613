import ForsettiCore
import ForsettiRuntime
import ForsettiTestSupport
import Foundation
import Glibc
import Testing

/// A control verb that writes the state directory reconciles at once; the watcher's news of
/// that same write must not judge everything a second time (issue 42: "a control write is
/// judged twice"). A write by anyone else, and a second write of other bytes, still is.
@Suite(.onTestThreads, .serialized) struct ControlWriteJudgedOnceTests {
  typealias Rig = ReconcilerTests.Rig

  /// How many full judgements the host has made (its `/metrics` histogram's count).
  static func judgings(_ host: ReconcilerTests.Host) -> UInt64 {
    host.manager.environment.metrics.judgings.snapshot().cumulative.last ?? 0
  }

  @Test func aControlWriteIsJudgedOnceAndAnotherWriterIsJudgedAgain() throws {
    let r = Rig()
    try r.module("com.test.one")
    try r.module("com.test.two")
    let host = try r.start()
    defer { host.stop() }
    try #require(r.state(host, "com.test.one") == .started)
    let answerer = ControlAnswerer(host: host, pid: getpid())

    let before = Self.judgings(host)
    let wakes = r.wakes.count.withLock { $0 }
    let answer = answerer.answer(ControlRequest(.disable(module: "com.test.one")))
    guard case .answered(_, let changes) = answer.outcome else {
      Issue.record("disable failed: \(answer)")
      return
    }
    #expect(changes.map(\.moduleID) == ["com.test.one"], "\(changes)")
    #expect(Self.judgings(host) == before + 1)
    // The watcher saw activation.json renamed into place, woke the host, and the host handled it.
    #expect(r.took(host, wakesBefore: wakes), "the host's own write never reached its watcher")
    #expect(Self.judgings(host) == before + 1, "the host's own write was judged again")
    #expect(r.state(host, "com.test.one") == .inactive(.moduleDisabled))

    // Positive control: the same file written by another program, other bytes, is judged, and
    // what it says is done.
    _ = try ActivationStore(stateDirectory: r.state).update { $0.enable("com.test.one") }
    #expect(
      r.until(step: { host.process() }) { Self.judgings(host) >= before + 2 },
      "another writer's change was never judged")
    #expect(r.until(step: { host.process() }) { r.state(host, "com.test.one") == .started })

    // And a file written with the very bytes judged (a `touch`-like rewrite) is not.
    let path = r.state + "/activation.json"
    let same = try Data(contentsOf: URL(fileURLWithPath: path))
    let judged = Self.judgings(host)
    let wakes2 = r.wakes.count.withLock { $0 }
    try ForsettiTestSupport.LiveHost.replaceFile(path, with: String(decoding: same, as: UTF8.self))
    #expect(r.took(host, wakesBefore: wakes2))
    #expect(Self.judgings(host) == judged, "bytes already judged were judged again")
  }
}
