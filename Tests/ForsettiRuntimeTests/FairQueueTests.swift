import ForsettiBridge
import Testing

/// The order in which a provider's waiting calls are taken (`FairQueue`): in rounds across
/// callers, a newcomer ahead of callers already served in the round, a dead call never costing
/// its caller the turn, and no caller holding more than its limit.
@Suite struct FairQueueTests {
  @Test func callersTakeTurnsWhateverHowManyEachQueued() {
    var q = FairQueue<String>()
    for i in 1...4 {
      let pushed = q.push("flood", "f\(i)", limit: 8)
      #expect(pushed)
    }
    let r1 = q.push("a", "a1", limit: 8)
    #expect(r1)
    let r2 = q.push("b", "b1", limit: 8)
    #expect(r2)
    let r3 = q.push("b", "b2", limit: 8)
    #expect(r3)
    var order: [String] = []
    while let x = q.pop() { order.append(x) }
    #expect(order == ["f1", "a1", "b1", "f2", "b2", "f3", "f4"])
    #expect(q.count == 0)
  }

  /// The polite consumer: it calls once at a time beside a flood that always has calls
  /// waiting. Each time it comes back it is next, not behind the flood's next call.
  @Test func aCallerThatComesBackIsNextNotBehindTheFlood() {
    var q = FairQueue<String>()
    for i in 1...4 { _ = q.push("flood", "f\(i)", limit: 8) }
    let running = q.pop()  // running when the polite call arrives
    #expect(running == "f1")
    for round in 1...3 {
      _ = q.push("polite", "p\(round)", limit: 8)
      let next = q.pop()
      #expect(next == "p\(round)", "round \(round)")
      _ = q.push("flood", "f+\(round)", limit: 8)
      let r4 = q.pop()
      #expect(r4?.hasPrefix("f") == true, "the flood gets its turn between")
    }
  }

  /// The red team's starvation: two callers calling one at a time, each calling again while
  /// the other's call runs, beside a caller with calls always queued. Each of the two starts
  /// waiting anew at every call; were that always the round under way, the two would take turns
  /// for ever and the queued caller never be served again. Between two of its calls, each of the
  /// others gets at most one.
  @Test func callersCallingOneAtATimeDoNotStarveACallerWithCallsQueued() {
    var q = FairQueue<String>()
    for _ in 1...3 { _ = q.push("busy", "busy", limit: 8) }
    _ = q.push("one", "one", limit: 8)
    var queued: Set<String> = ["one"]
    var order: [String] = []
    for _ in 0..<30 {
      guard let x = q.pop() else { break }
      order.append(x)
      queued.remove(x)
      // The busy caller always has calls queued; while x's call runs, each caller calling one
      // at a time whose last call is answered calls again.
      if x == "busy" { _ = q.push("busy", "busy", limit: 8) }
      for p in ["one", "two"] where p != x && !queued.contains(p) {
        _ = q.push(p, p, limit: 8)
        queued.insert(p)
      }
    }
    var run = 0
    var worst = 0
    for x in order {
      run = x == "busy" ? 0 : run + 1
      worst = max(worst, run)
    }
    #expect(worst <= 2, "\(order)")
    #expect(order.filter { $0 == "busy" }.count >= 9, "\(order)")
  }

  /// A caller with more calls waiting than can finish in their time: its turn goes to its
  /// oldest call that can still finish (here: time left ≥ 5), else to its newest, never to one
  /// that would only run out of time while running; another caller's turn is untouched.
  @Test func aCallersTurnGoesToACallThatCanStillFinish() {
    var q = FairQueue<Int>()
    for left in [2, 3, 7, 9] { _ = q.push("a", left, limit: 8) }
    _ = q.push("b", 1, limit: 8)
    var dead: [Int] = []
    let first = q.pop(live: { _ in true }, dead: &dead, preferring: { $0 >= 5 })
    #expect(first == 7, "the oldest that can finish")
    let second = q.pop(live: { _ in true }, dead: &dead, preferring: { $0 >= 5 })
    #expect(second == 1, "b's turn, even with no time: it has no other call")
    let third = q.pop(live: { _ in true }, dead: &dead, preferring: { $0 >= 5 })
    #expect(third == 9)
    let fourth = q.pop(live: { _ in true }, dead: &dead, preferring: { $0 >= 5 })
    #expect(fourth == 3, "none can finish: the newest")
    #expect(q.count == 1)
  }

  @Test func deadCallsAreTakenOutWithoutCostingTheTurn() {
    var q = FairQueue<Int>()
    _ = q.push("a", -1, limit: 8)
    _ = q.push("a", -2, limit: 8)
    _ = q.push("a", 3, limit: 8)
    _ = q.push("b", 4, limit: 8)
    var dead: [Int] = []
    let r5 = q.pop(live: { $0 > 0 }, dead: &dead)
    #expect(r5 == 3, "a keeps its turn past its dead calls")
    #expect(dead == [-1, -2])
    let r6 = q.pop(live: { $0 > 0 }, dead: &dead)
    #expect(r6 == 4)
    #expect(q.count == 0)
  }

  @Test func aCallerCannotQueueBeyondItsLimitAndGivingUpLeavesTheQueue() {
    var q = FairQueue<Int>()
    for i in 0..<4 {
      let pushed = q.push("a", i, limit: 4)
      #expect(pushed)
    }
    let r7 = q.push("a", 9, limit: 4)
    #expect(!r7, "a fifth call is refused")
    let r8 = q.push("b", 10, limit: 4)
    #expect(r8, "another caller's queue is its own")
    let r9 = q.remove("a") { $0 == 2 }
    #expect(r9)
    let r10 = q.remove("a") { $0 == 2 }
    #expect(!r10)
    #expect(q.count == 4)
    let pushed = q.push("a", 11, limit: 4)
    #expect(pushed, "a has room for one more once one call left its queue")
  }
}
