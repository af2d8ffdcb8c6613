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
  static func enter(_ lane: DeliveryLane) -> Bool {
    lane.inFlight.add(1, ordering: .sequentiallyConsistent)
    if lane.closed.load(ordering: .sequentiallyConsistent) {
      lane.inFlight.subtract(1, ordering: .sequentiallyConsistent)
      return false
    }
    return true
  }

  static func leave(_ lane: DeliveryLane) { lane.inFlight.subtract(1, ordering: .sequentiallyConsistent) }

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

  /// A thread's own stack; reached only from that thread.
  final class Stack {
    // Unchecked: a stack is reached only from its own thread and never re-entrantly, so the
    // runtime's exclusivity bookkeeping (a thread-local set per access) only costs time.
    @exclusivity(unchecked) var lanes: [ObjectIdentifier] = []
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

  static func count(of lane: DeliveryLane) -> Int {
    let id = ObjectIdentifier(lane)
    return stack.lanes.reduce(0) { $0 + ($1 == id ? 1 : 0) }
  }

  static func with<T>(_ lane: DeliveryLane, on s: Stack = stack, _ body: () -> T) -> T? {
    guard s.lanes.count < limit else { return nil }
    s.lanes.append(ObjectIdentifier(lane))
    defer { s.lanes.removeLast() }
    return body()
  }
}

/// Publish/subscribe between modules. The publisher's identity comes from its binding; a
/// subscription belongs to the module that made it and ends when that module stops.
public final class EventBus: Sendable {
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

  /// `ids` mirrors `subscriptions` so that finding one by ID scans plain integers, without
  /// touching (and retaining) the strings and closures of every subscription.
  private let state = Mutex<(next: Int64, subscriptions: [Subscription], ids: [Int64])>((1, [], []))
  let gate = DeliveryGate()

  /// Prefix reserved for the host's own events and messages.
  public static let reservedPrefix = "forsetti.internal."
  public static let maxPayload = HostFunctions.maxPayload
  /// Subscriptions one module may hold.
  public static let maxSubscriptionsPerModule = 256

  public init() {}

  /// A new subscription ID, or a negative status (module closed, too many subscriptions).
  func subscribe(moduleID: String, eventType: String, target: DeliveryTarget<forsetti_event_handler>) -> Int64
  {
    let lane = gate.lane(moduleID)
    guard !lane.closed.load(ordering: .sequentiallyConsistent) else { return Int64(FORSETTI_ERR_REVOKED) }
    return state.withLock { s in
      guard s.subscriptions.lazy.filter({ $0.moduleID == moduleID }).count < Self.maxSubscriptionsPerModule
      else {
        return Int64(FORSETTI_ERR_TOO_LARGE)
      }
      let id = s.next
      s.next += 1
      s.subscriptions.append(
        Subscription(id: id, moduleID: moduleID, eventType: eventType, target: target, lane: lane))
      s.ids.append(id)
      return id
    }
  }

  /// Ends subscription `id` if `moduleID` made it.
  func unsubscribe(moduleID: String, id: Int64) -> Bool {
    state.withLock { s in
      guard let i = s.ids.firstIndex(of: id), s.subscriptions[i].moduleID == moduleID else {
        return false
      }
      s.subscriptions.remove(at: i)
      s.ids.remove(at: i)
      return true
    }
  }

  /// Removes every subscription of a stopping module.
  public func removeAll(moduleID: String) {
    state.withLock { s in
      s.subscriptions.removeAll { $0.moduleID == moduleID }
      s.ids = s.subscriptions.map(\.id)
    }
  }

  /// How many subscriptions `moduleID` holds.
  public func subscriptionCount(moduleID: String) -> Int {
    state.withLock { s in s.subscriptions.filter { $0.moduleID == moduleID }.count }
  }

  /// Delivers to a snapshot of the matching subscribers, outside the lock, so a handler may
  /// publish or subscribe in turn; a subscriber taken off the bus in the meantime is skipped.
  /// Returns how many handlers were called, or nil when deliveries nest too deeply.
  @discardableResult
  func publish(from source: String, eventType: String, payload: UnsafeRawPointer?, length: Int) -> Int? {
    let depth = DeliveryDepth.stack
    guard depth.lanes.count < DeliveryDepth.limit else { return nil }
    // The whole array, not a filtered copy: subscribing copies it only while a publish holds it.
    let all = state.withLock { $0.subscriptions }
    if all.isEmpty { return 0 }
    // The C strings are made once per publish; every local handler gets the same two.
    return source.withCString { src in
      eventType.withCString { type in
        var delivered = 0
        for t in all where (t.eventType == eventType || t.eventType == "*") && DeliveryGate.enter(t.lane) {
          defer { DeliveryGate.leave(t.lane) }
          _ = DeliveryDepth.with(t.lane, on: depth) {
            switch t.target {
            case .local(let c): c.function(c.context, src, type, payload, length)
            case .remote(let forward):
              forward(source, eventType, UnsafeRawBufferPointer(start: payload, count: length))
            }
          }
          delivered += 1
        }
        return delivered
      }
    }
  }
}

/// Direct messages: one handler per module; the sender is always the bound module.
public final class MessageRouter: Sendable {
  private let handlers = Mutex<
    [String: (target: DeliveryTarget<forsetti_message_handler>, lane: DeliveryLane)]
  >([:])
  let gate = DeliveryGate()

  public init() {}

  func setHandler(moduleID: String, _ target: DeliveryTarget<forsetti_message_handler>?) -> Bool {
    guard !gate.isClosed(moduleID) || target == nil else { return false }
    let lane = gate.lane(moduleID)
    handlers.withLock { $0[moduleID] = target.map { ($0, lane) } }
    return true
  }

  public func removeHandler(moduleID: String) { handlers.withLock { $0[moduleID] = nil } }

  public enum Delivery: Sendable { case delivered, noHandler, tooDeep }

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
