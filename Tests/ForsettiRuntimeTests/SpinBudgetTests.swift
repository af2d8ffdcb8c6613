import ForsettiBridge
import Testing

/// The caller's and the server's spin on a ring (`SpinBudget`): spinning in vain backs off to
/// sleeping at once, as a loaded machine needs; answers within the spin bring it back.
@Suite struct SpinBudgetTests {
  @Test func spinsInVainBackOffToNoneAndAnswersBringTheSpinBack() {
    let b = SpinBudget(ceiling: 50_000)
    #expect(b.next == 50_000)
    for _ in 0..<10 { b.record(answeredWhileSpinning: false) }
    #expect(b.current < SpinBudget.floor)
    // Down to none: sleep at once, but try a short spin once in `retryEvery` waits.
    let spins = (0..<Int(SpinBudget.retryEvery) * 2).map { _ in b.next }
    #expect(b.retry > 0 && b.retry < 50_000)
    #expect(spins.filter { $0 == b.retry }.count == 2)
    #expect(spins.filter { $0 == 0 }.count == spins.count - 2)
    for _ in 0..<10 { b.record(answeredWhileSpinning: true) }
    #expect(b.current == 50_000)
    #expect(b.next == 50_000)
  }
}
