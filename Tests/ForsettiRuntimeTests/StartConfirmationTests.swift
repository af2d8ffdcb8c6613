import ForsettiBridge
import Testing

@testable import ForsettiRuntime

/// A start is confirmed only by `startConfirmed` under the nonce the host sent in `confirmStart`
/// (`WorkerSession`): a module's thread that forges one, before the host asked or under another
/// number, broke the protocol.
@Suite struct StartConfirmationTests {
  /// A session that has just received `startResult(FORSETTI_OK)`.
  static func returned() -> WorkerSession {
    let s = WorkerSession()
    _ = s.configure()
    _ = s.receive(WireFrame(.confined, [.string("{}")]))
    _ = s.receive(WireFrame(.loaded, [.string("{}")]))
    _ = s.start()
    _ = s.receive(WireFrame(.startResult, [.int(0)]))
    return s
  }

  static func isViolation(_ v: WorkerSession.Verdict) -> Bool {
    if case .violation = v { true } else { false }
  }

  @Test func aStartResultIsNotYetAStart() {
    let s = Self.returned()
    #expect(s.phase == .returned)
    // Before the host asked: no nonce can be right.
    #expect(Self.isViolation(s.receive(WireFrame(.startConfirmed, id: 1))))
  }

  @Test func onlyTheNonceSentConfirms() throws {
    let wrong = Self.returned()
    let sent = try #require(wrong.confirmStart())
    #expect(sent != 0)
    #expect(Self.isViolation(wrong.receive(WireFrame(.startConfirmed, id: sent &+ 1))))

    let right = Self.returned()
    let nonce = try #require(right.confirmStart())
    #expect(right.receive(WireFrame(.startConfirmed, id: nonce)) == .lifecycle)
    #expect(right.phase == .started)
    // A second `startResult` (the real one after a forged one) is a violation while confirming.
    let forged = Self.returned()
    _ = forged.confirmStart()
    #expect(Self.isViolation(forged.receive(WireFrame(.startResult, [.int(0)]))))
  }
}
