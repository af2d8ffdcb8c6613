/// Calls waiting for a provider's handlers: one first-in-first-out queue per caller, taken in
/// rounds across callers — each caller with calls waiting gets one call per round, and a caller
/// that starts waiting joins the round under way, ahead of the callers already served in it,
/// unless it was served in that round itself: then it joins the next. So one caller's many
/// calls delay another's by at most one call per handler (the one running), never by a call of
/// theirs queued after it; and callers calling one at a time, each starting to wait anew at
/// every call, cannot keep the round under way to themselves while a caller with calls queued
/// waits in the next. A pure value: the worker's `RoleServer` and the host's `FairGate` drive it.
package struct FairQueue<Item> {
  fileprivate struct Caller {
    var items: [Item] = []
    /// The round its next call is served in.
    var round: UInt64
    /// When it started waiting (ties in a round go to the earliest).
    var since: UInt64
  }

  private var callers: [String: Caller] = [:]
  /// The round of the call taken last.
  private var round: UInt64 = 0
  /// The callers served in `round` (emptied when a later round begins): a bound on memory of
  /// past callers, since only these join a later round than the one under way.
  private var servedInRound: Set<String> = []
  private var arrivals: UInt64 = 0

  package init() {}

  /// How many calls wait.
  package private(set) var count = 0

  /// Queues `item` for `caller` unless `limit` of its calls wait already: false then.
  package mutating func push(_ caller: String, _ item: Item, limit: Int) -> Bool {
    if var c = callers[caller] {
      guard c.items.count < limit else { return false }
      c.items.append(item)
      callers[caller] = c
    } else {
      guard limit > 0 else { return false }
      arrivals &+= 1
      let joins = servedInRound.contains(caller) ? round &+ 1 : round
      callers[caller] = Caller(items: [item], round: joins, since: arrivals)
    }
    count += 1
    return true
  }

  /// The caller whose turn it is: the earliest round, then the earliest to start waiting.
  private var next: String? {
    callers.min { a, b in (a.value.round, a.value.since) < (b.value.round, b.value.since) }?.key
  }

  /// The next call in turn.
  package mutating func pop() -> Item? {
    var none: [Item] = []
    return pop(live: { _ in true }, dead: &none)
  }

  /// The next call in turn that `isLive`: calls of the caller whose turn it is that are not
  /// (their deadline passed, their caller withdrew them) are taken out into `dead` without
  /// costing that caller its turn. Of that caller's live calls, the first (oldest) that
  /// `canFinish`, else its newest: when a caller has more calls waiting than can be served in
  /// their time, its oldest would only run out of time while running, and every call it got
  /// would end TIMEOUT; the order among one caller's calls, made from threads of its own, is
  /// no promise.
  package mutating func pop(
    live isLive: (Item) -> Bool, dead: inout [Item], preferring canFinish: (Item) -> Bool = { _ in true }
  ) -> Item? {
    while let key = next, var c = callers[key] {
      var live: [Item] = []
      for item in c.items {
        if isLive(item) { live.append(item) } else { dead.append(item) }
      }
      count -= c.items.count - live.count
      c.items = live
      guard !c.items.isEmpty else {
        callers[key] = nil
        continue
      }
      let item = c.items.remove(at: c.items.firstIndex(where: canFinish) ?? c.items.count - 1)
      count -= 1
      if c.round != round { servedInRound.removeAll(keepingCapacity: true) }
      round = c.round
      servedInRound.insert(key)
      c.round &+= 1
      callers[key] = c.items.isEmpty ? nil : c
      return item
    }
    return nil
  }

  /// Takes out the first waiting call of `caller` that `matches` (it gave up): true when found.
  package mutating func remove(_ caller: String, where matches: (Item) -> Bool) -> Bool {
    guard var c = callers[caller], let i = c.items.firstIndex(where: matches) else { return false }
    c.items.remove(at: i)
    count -= 1
    callers[caller] = c.items.isEmpty ? nil : c
    return true
  }
}

extension FairQueue: Sendable where Item: Sendable {}
extension FairQueue.Caller: Sendable where Item: Sendable {}
