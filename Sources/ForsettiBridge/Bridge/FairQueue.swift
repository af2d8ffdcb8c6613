/// Calls waiting for a provider's handlers: one first-in-first-out queue per caller, taken in
/// turn across callers, so one caller's many calls delay another's by at most one call per
/// handler. A pure value: the worker's `RoleServer` and the host's `FairGate` drive it.
package struct FairQueue<Item> {
  private var queues: [String: [Item]] = [:]
  /// The callers with calls waiting, in the order their turn comes.
  private var order: [String] = []

  package init() {}

  /// How many calls wait.
  package private(set) var count = 0

  /// How many of `caller`'s calls wait.
  package func waiting(_ caller: String) -> Int { queues[caller]?.count ?? 0 }

  /// Queues `item` for `caller` unless `limit` of its calls wait already: false then.
  package mutating func push(_ caller: String, _ item: Item, limit: Int) -> Bool {
    let queued = queues[caller]?.count ?? 0
    guard queued < limit else { return false }
    if queued == 0 { order.append(caller) }
    queues[caller, default: []].append(item)
    count += 1
    return true
  }

  /// The next call: the oldest of the caller whose turn it is, who then goes to the back.
  package mutating func pop() -> Item? {
    guard !order.isEmpty else { return nil }
    let caller = order.removeFirst()
    guard var queue = queues[caller], !queue.isEmpty else { return pop() }
    let item = queue.removeFirst()
    count -= 1
    if queue.isEmpty {
      queues[caller] = nil
    } else {
      queues[caller] = queue
      order.append(caller)
    }
    return item
  }

  /// The next call that `isLive`: calls of the caller whose turn it is that are not (their
  /// deadline passed, their caller withdrew them) are taken out into `dead` without costing
  /// that caller its turn.
  package mutating func pop(live isLive: (Item) -> Bool, dead: inout [Item]) -> Item? {
    while let caller = order.first {
      guard var queue = queues[caller] else {
        order.removeFirst()
        continue
      }
      while let head = queue.first, !isLive(head) {
        dead.append(queue.removeFirst())
        count -= 1
      }
      if queue.isEmpty {
        queues[caller] = nil
        order.removeFirst()
        continue
      }
      queues[caller] = queue
      return pop()
    }
    return nil
  }

  /// Takes out the first waiting call of `caller` that `matches` (it gave up): true when found.
  package mutating func remove(_ caller: String, where matches: (Item) -> Bool) -> Bool {
    guard var queue = queues[caller], let i = queue.firstIndex(where: matches) else { return false }
    queue.remove(at: i)
    count -= 1
    if queue.isEmpty {
      queues[caller] = nil
      order.removeAll { $0 == caller }
    } else {
      queues[caller] = queue
    }
    return true
  }
}
