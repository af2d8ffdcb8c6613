import CForsetti
import ForsettiBridge
import Glibc
import Synchronization

/// Where an event or message goes: a C handler in this process, or a forwarder to a worker.
enum DeliveryTarget<F>: Sendable {
  case local(ModuleCallback<F>)
  case remote(@Sendable (_ source: String, _ type: String, _ payload: UnsafeRawBufferPointer) -> Void)
}

/// One module's side of deliveries: whether it may receive and how many deliveries to it are
/// under way. Looked up once per subscription (or handler), so a delivery costs atomics, not
/// hashing of module IDs.
final class DeliveryLane: Sendable {
  let closed = Atomic<Bool>(false)
  let inFlight = Atomic<Int>(0)

  /// Deliveries to this module on the calling thread right now.
  var depthHere: Int { DeliveryDepth.count(of: self) }
}

/// Which modules may receive deliveries, and how many deliveries to each are under way, so a
/// module being stopped can be taken off the bus and waited out before its `stop` runs.
final class DeliveryGate: Sendable {
  private let lanes = Mutex<[String: DeliveryLane]>([:])

  /// The lane of `moduleID`, made on first use (lanes live as long as the host).
  func lane(_ moduleID: String) -> DeliveryLane {
    lanes.withLock { l in
      if let lane = l[moduleID] { return lane }
      let lane = DeliveryLane()
      l[moduleID] = lane
      return lane
    }
  }

  /// Re-admits a module ID (a new instance starts under it).
  func open(_ moduleID: String) { lane(moduleID).closed.store(false, ordering: .sequentiallyConsistent) }

  /// No new subscription, handler or delivery for `moduleID` from now on.
  func close(_ moduleID: String) { lane(moduleID).closed.store(true, ordering: .sequentiallyConsistent) }

  func isClosed(_ moduleID: String) -> Bool { lane(moduleID).closed.load(ordering: .sequentiallyConsistent) }

  /// Marks a delivery as begun, unless the module is closed. Counting first and checking after
  /// pairs with `close` then `quiesce`: either the delivery sees the module closed, or
  /// `quiesce` sees the delivery.
  ///
  /// Wrapping arithmetic: the count is at most the deliveries running at once (threads times
  /// `DeliveryDepth.limit`), never near overflow, and the checked form is a compare-and-swap
  /// loop where this is one `lock xadd`.
  static func enter(_ lane: DeliveryLane) -> Bool {
    lane.inFlight.wrappingAdd(1, ordering: .sequentiallyConsistent)
    if lane.closed.load(ordering: .sequentiallyConsistent) {
      lane.inFlight.wrappingSubtract(1, ordering: .sequentiallyConsistent)
      return false
    }
    return true
  }

  static func leave(_ lane: DeliveryLane) {
    lane.inFlight.wrappingSubtract(1, ordering: .sequentiallyConsistent)
  }

  /// Waits (at most `limit` seconds) until no delivery to `moduleID` is under way on another
  /// thread. A handler that is itself stopping its module is not waited for.
  func quiesce(_ moduleID: String, limit: Double = 1) -> Bool {
    let l = lane(moduleID)
    let own = l.depthHere
    var waited = 0.0
    while l.inFlight.load(ordering: .sequentiallyConsistent) > own {
      if waited >= limit { return false }
      usleep(1000)
      waited += 0.001
    }
    return true
  }
}

/// How deeply the current thread is nested in deliveries, so that modules answering each other
/// cannot recurse until the stack runs out. One thread-local stack of the lanes being delivered
/// to (not a pthread key per module: a process has only 1,024 keys).
enum DeliveryDepth {
  static let limit = 16

  /// A thread's own stack of at most `limit` lanes; reached only from that thread.
  final class Stack {
    // Fixed storage, not an array: a push and a pop are a store and a count, with no
    // uniqueness check or reallocation on the path of every delivery.
    private let lanes = UnsafeMutablePointer<ObjectIdentifier>.allocate(capacity: DeliveryDepth.limit)
    // Unchecked: a stack is reached only from its own thread and never re-entrantly, so the
    // runtime's exclusivity bookkeeping (a thread-local set per access) only costs time.
    @exclusivity(unchecked) private(set) var depth = 0

    deinit { lanes.deallocate() }

    /// Whether another delivery may begin on this thread.
    var hasRoom: Bool { depth < DeliveryDepth.limit }

    /// Enters `lane`; false (and nothing entered) when the stack is full.
    func push(_ lane: DeliveryLane) -> Bool {
      guard depth < DeliveryDepth.limit else { return false }
      (lanes + depth).initialize(to: ObjectIdentifier(lane))
      depth += 1
      return true
    }

    /// Leaves the lane of the last successful `push`.
    func pop() { depth -= 1 }

    func count(of lane: DeliveryLane) -> Int {
      let id = ObjectIdentifier(lane)
      var n = 0
      for i in 0..<depth where lanes[i] == id { n += 1 }
      return n
    }
  }

  private static let key: pthread_key_t = {
    var k = pthread_key_t()
    pthread_key_create(&k) { p in
      if let p { Unmanaged<Stack>.fromOpaque(p).release() }
    }
    return k
  }()

  /// The calling thread's stack; fetch it once per publish, not once per delivery.
  static var stack: Stack {
    if let p = pthread_getspecific(key) { return Unmanaged<Stack>.fromOpaque(p).takeUnretainedValue() }
    let s = Stack()
    pthread_setspecific(key, Unmanaged.passRetained(s).toOpaque())
    return s
  }

  static func count(of lane: DeliveryLane) -> Int { stack.count(of: lane) }

  static func with<T>(_ lane: DeliveryLane, on s: Stack = stack, _ body: () -> T) -> T? {
    guard s.push(lane) else { return nil }
    defer { s.pop() }
    return body()
  }
}

/// Publish/subscribe between modules. The publisher's identity comes from its binding; a
/// subscription belongs to the module that made it and ends when that module stops.
package final class EventBus: Sendable {
  /// A class, so that taking a snapshot of the bus retains one buffer, and iterating it one
  /// object per subscription, instead of copying every field of every subscription.
  final class Subscription: Sendable {
    let id: Int64
    let moduleID: String
    let eventType: String
    let target: DeliveryTarget<forsetti_event_handler>
    let lane: DeliveryLane

    init(
      id: Int64, moduleID: String, eventType: String, target: DeliveryTarget<forsetti_event_handler>,
      lane: DeliveryLane
    ) {
      self.id = id
      self.moduleID = moduleID
      self.eventType = eventType
      self.target = target
      self.lane = lane
    }
  }

  /// One module's subscriptions, found once per binding, so that `unsubscribe` needs neither
  /// the module's ID nor the bus's lock to refuse a token the module does not hold.
  ///
  /// A subscription ID is `serial * slots.count + slot`: `serial` is unique on the bus, `slot`
  /// is where the module's book holds it. Slot `id % slots.count` of a book holds `id` exactly
  /// while that subscription of this module is live (0 otherwise), so one atomic load answers
  /// "does this module hold `id`?". Another module's ID, a stale one or a forged one finds a 0
  /// or a different (unique) ID there. Slots are written only under the bus's lock, which also
  /// re-checks the slot before removing anything; the lock-free load only ever refuses. It
  /// refuses only what the module does not hold at that moment: `subscribe` stores the slot
  /// (releasing) before it returns the ID, so any thread that has the ID from it sees it.
  final class Book: Sendable {
    let moduleID: String
    let lane: DeliveryLane
    /// As many as `maxSubscriptionsPerModule`: a module with every slot taken holds the maximum.
    fileprivate let slots: InlineArray<256, Atomic<Int64>> = InlineArray { _ in Atomic(0) }
    static let width = 256

    fileprivate init(moduleID: String, lane: DeliveryLane) {
      self.moduleID = moduleID
      self.lane = lane
    }

    /// Whether `id` is a live subscription of this module right now (no lock: see the type).
    fileprivate func holds(_ id: Int64) -> Bool {
      guard id > 0 else { return false }
      return slots[Int(id % Int64(slots.count))].load(ordering: .acquiring) == id
    }
  }

  private struct State {
    var serial: Int64 = 1
    var subscriptions: [Subscription] = []
    /// Mirrors `subscriptions` so that finding one by ID scans plain integers, without
    /// touching (and retaining) the strings and closures of every subscription.
    var ids: [Int64] = []
    /// Every module ID ever seen on the bus; books live as long as the bus, as lanes do.
    var books: [String: Book] = [:]
  }

  private let state = Mutex<State>(State())
  let gate = DeliveryGate()

  /// Prefix reserved for the host's own events and messages.
  package static let reservedPrefix = "forsetti.internal."
  package static let maxPayload = HostFunctions.maxPayload
  /// Subscriptions one module may hold.
  package static let maxSubscriptionsPerModule = Int(FORSETTI_EVENT_MAX_SUBSCRIPTIONS)

  package init() {}

  /// The book of `moduleID`, made on first use. A binding looks it up once, not per call.
  func book(_ moduleID: String) -> Book {
    state.withLock { s in
      if let b = s.books[moduleID] { return b }
      let b = Book(moduleID: moduleID, lane: gate.lane(moduleID))
      s.books[moduleID] = b
      return b
    }
  }

  /// A new subscription ID, or a negative status (module closed, too many subscriptions).
  func subscribe(moduleID: String, eventType: String, target: DeliveryTarget<forsetti_event_handler>) -> Int64
  {
    subscribe(book(moduleID), eventType: eventType, target: target)
  }

  /// As `subscribe(moduleID:…)`, for a module whose book its binding holds.
  func subscribe(_ book: Book, eventType: String, target: DeliveryTarget<forsetti_event_handler>) -> Int64 {
    state.withLock { s in
      // Checked under the lock: `removeAll` runs after `close`, so a subscription either sees
      // the module closed here or is appended before `removeAll` takes it away.
      guard !book.lane.closed.load(ordering: .sequentiallyConsistent) else {
        return Int64(FORSETTI_ERR_REVOKED)
      }
      let width = book.slots.count
      var free: Int?
      for i in 0..<min(width, Self.maxSubscriptionsPerModule)
      where book.slots[i].load(ordering: .relaxed) == 0 {
        free = i
        break
      }
      guard let slot = free else { return Int64(FORSETTI_ERR_TOO_LARGE) }
      let (base, overflow) = s.serial.multipliedReportingOverflow(by: Int64(width))
      // 2^55 subscriptions would be needed first; refused rather than wrapped to a reused ID.
      guard !overflow, base <= Int64.max - Int64(slot) else { return Int64(FORSETTI_ERR_TOO_LARGE) }
      let id = base + Int64(slot)
      s.serial += 1
      s.subscriptions.append(
        Subscription(id: id, moduleID: book.moduleID, eventType: eventType, target: target, lane: book.lane))
      s.ids.append(id)
      book.slots[slot].store(id, ordering: .releasing)
      return id
    }
  }

  /// `moduleID`'s subscriptions, their IDs and event types (handed to a new image of the host).
  func subscriptions(of moduleID: String) -> [(id: Int64, type: String)] {
    state.withLock { s in s.subscriptions.filter { $0.moduleID == moduleID }.map { ($0.id, $0.eventType) } }
  }

  /// No ID at or below `id` is given from now on: those an image of the host before this one
  /// gave are entered again first (`restore`), whichever module subscribes meanwhile.
  func reserve(upTo id: Int64) {
    // Every book's width: an ID is `serial × width + slot`.
    let width = Int64(Book.width)
    state.withLock { s in
      if id > 0 { s.serial = max(s.serial, id / width + 1) }
    }
  }

  /// Enters subscription `id` of `moduleID` again, under the ID the module holds (an image of
  /// the host before this one gave it): false when the ID is not one this bus could have given
  /// the module in that slot, or the slot is taken.
  func restore(moduleID: String, id: Int64, eventType: String, target: DeliveryTarget<forsetti_event_handler>)
    -> Bool
  {
    let book = book(moduleID)
    return state.withLock { s in
      let width = Int64(book.slots.count)
      let slot = Int(id % width)
      guard id > 0, slot < Self.maxSubscriptionsPerModule, !eventType.isEmpty,
        book.slots[slot].load(ordering: .relaxed) == 0,
        !book.lane.closed.load(ordering: .sequentiallyConsistent)
      else { return false }
      // IDs given from now on are above every restored one: none is given twice.
      s.serial = max(s.serial, id / width + 1)
      s.subscriptions.append(
        Subscription(id: id, moduleID: moduleID, eventType: eventType, target: target, lane: book.lane))
      s.ids.append(id)
      book.slots[slot].store(id, ordering: .releasing)
      return true
    }
  }

  /// Ends subscription `id` if `moduleID` made it.
  func unsubscribe(moduleID: String, id: Int64) -> Bool {
    unsubscribe(book(moduleID), id: id)
  }

  /// Ends subscription `id` if the module of `book` made it. Refusing takes one atomic load.
  @inline(__always)
  func unsubscribe(_ book: Book, id: Int64) -> Bool {
    guard book.holds(id) else { return false }
    return end(book, id: id)
  }

  @inline(never)
  private func end(_ book: Book, id: Int64) -> Bool {
    state.withLock { s in
      // Again under the lock: another thread of the module may have ended it meanwhile.
      guard book.holds(id),
        let i = s.ids.indices.first(where: {
          s.ids[$0] == id && s.subscriptions[$0].moduleID == book.moduleID
        })
      else { return false }
      s.subscriptions.remove(at: i)
      s.ids.remove(at: i)
      book.slots[Int(id % Int64(book.slots.count))].store(0, ordering: .releasing)
      return true
    }
  }

  /// Removes every subscription of a stopping module.
  package func removeAll(moduleID: String) {
    state.withLock { s in
      s.subscriptions.removeAll { $0.moduleID == moduleID }
      s.ids = s.subscriptions.map(\.id)
      guard let book = s.books[moduleID] else { return }
      for i in 0..<book.slots.count { book.slots[i].store(0, ordering: .releasing) }
    }
  }

  /// How many subscriptions `moduleID` holds.
  package func subscriptionCount(moduleID: String) -> Int {
    state.withLock { s in s.subscriptions.filter { $0.moduleID == moduleID }.count }
  }

  /// Delivers to a snapshot of the matching subscribers, outside the lock, so a handler may
  /// publish or subscribe in turn; a subscriber taken off the bus in the meantime is skipped.
  /// Returns how many handlers were called, or nil when deliveries nest too deeply.
  @discardableResult
  func publish(from source: String, eventType: String, payload: UnsafeRawPointer?, length: Int) -> Int? {
    let depth = DeliveryDepth.stack
    guard depth.hasRoom else { return nil }
    // The whole array, not a filtered copy: subscribing copies it only while a publish holds it.
    let all = state.withLock { $0.subscriptions }
    if all.isEmpty { return 0 }
    // The C strings are made once per publish; every local handler gets the same two.
    return source.withCString { src in
      eventType.withCString { type in
        // Consecutive deliveries to one module enter its lane once (one pair of atomic
        // updates, not one per subscription). `closed` is still read before each delivery
        // while the lane is entered, which is what `enter` does: either a delivery sees the
        // module closed, or `quiesce` sees it counted. The lane is on the depth stack once
        // while entered, as it was once per delivery, so nesting and `quiesce` count alike.
        var entered: DeliveryLane?
        var delivered = 0
        for t in all where t.eventType == eventType || t.eventType == "*" {
          if entered !== t.lane {
            if let held = entered {
              depth.pop()
              DeliveryGate.leave(held)
              entered = nil
            }
            // `hasRoom` above leaves room for this one lane.
            guard DeliveryGate.enter(t.lane) else { continue }
            guard depth.push(t.lane) else {
              DeliveryGate.leave(t.lane)
              continue
            }
            entered = t.lane
          } else if t.lane.closed.load(ordering: .sequentiallyConsistent) {
            continue
          }
          switch t.target {
          case .local(let c): c.function(c.context, src, type, payload, length)
          case .remote(let forward):
            forward(source, eventType, UnsafeRawBufferPointer(start: payload, count: length))
          }
          delivered += 1
        }
        if let held = entered {
          depth.pop()
          DeliveryGate.leave(held)
        }
        return delivered
      }
    }
  }
}

/// Direct messages: one handler per module; the sender is always the bound module.
package final class MessageRouter: Sendable {
  private let handlers = Mutex<
    [String: (target: DeliveryTarget<forsetti_message_handler>, lane: DeliveryLane)]
  >([:])
  let gate = DeliveryGate()

  package init() {}

  func setHandler(moduleID: String, _ target: DeliveryTarget<forsetti_message_handler>?) -> Bool {
    guard !gate.isClosed(moduleID) || target == nil else { return false }
    let lane = gate.lane(moduleID)
    handlers.withLock { $0[moduleID] = target.map { ($0, lane) } }
    return true
  }

  package func removeHandler(moduleID: String) { handlers.withLock { $0[moduleID] = nil } }

  /// Whether `moduleID` takes messages now.
  func hasHandler(_ moduleID: String) -> Bool { handlers.withLock { $0[moduleID] != nil } }

  package enum Delivery: Sendable { case delivered, noHandler, tooDeep }

  /// Delivers to the target's handler.
  func deliver(from sender: String, to target: String, type: String, payload: UnsafeRawPointer?, length: Int)
    -> Delivery
  {
    guard let (h, lane) = handlers.withLock({ $0[target] }), DeliveryGate.enter(lane) else {
      return .noHandler
    }
    defer { DeliveryGate.leave(lane) }
    let done: Bool? = DeliveryDepth.with(lane) {
      switch h {
      case .local(let c):
        sender.withCString { s in type.withCString { t in c.function(c.context, s, t, payload, length) } }
      case .remote(let forward): forward(sender, type, UnsafeRawBufferPointer(start: payload, count: length))
      }
      return true
    }
    return done == nil ? .tooDeep : .delivered
  }
}
