import CForsetti
import Glibc
import Synchronization

/// A C callback and the context pointer the module gave with it. Opaque values handed back to
/// module code, never dereferenced by the host.
struct ModuleCallback<F>: @unchecked Sendable {
  // @unchecked: `context` is the module's own pointer; the host only passes it back.
  var function: F
  var context: UnsafeMutableRawPointer?
}

/// Where an event or message goes: a C handler in this process, or a forwarder to a worker.
enum DeliveryTarget<F>: Sendable {
  case local(ModuleCallback<F>)
  case remote(@Sendable (_ source: String, _ type: String, _ payload: UnsafeRawBufferPointer) -> Void)
}

/// Which modules may receive deliveries, and how many deliveries to each are under way, so a
/// module being stopped can be taken off the bus and waited out before its `stop` runs.
final class DeliveryGate: Sendable {
  private let state = Mutex<(closed: Set<String>, inFlight: [String: Int])>(([], [:]))

  /// Re-admits a module ID (a new instance starts under it).
  func open(_ moduleID: String) { state.withLock { _ = $0.closed.remove(moduleID) } }

  /// No new subscription, handler or delivery for `moduleID` from now on.
  func close(_ moduleID: String) { state.withLock { _ = $0.closed.insert(moduleID) } }

  func isClosed(_ moduleID: String) -> Bool { state.withLock { $0.closed.contains(moduleID) } }

  /// Marks a delivery to `moduleID` as begun, unless the module is closed.
  func enter(_ moduleID: String) -> Bool {
    state.withLock { s in
      guard !s.closed.contains(moduleID) else { return false }
      s.inFlight[moduleID, default: 0] += 1
      return true
    }
  }

  func leave(_ moduleID: String) { state.withLock { $0.inFlight[moduleID, default: 1] -= 1 } }

  /// Waits (at most `limit` seconds) until no delivery to `moduleID` is under way on another
  /// thread. A handler that is itself stopping its module is not waited for.
  func quiesce(_ moduleID: String, limit: Double = 1) -> Bool {
    let own = DeliveryDepth.current(for: moduleID)
    var waited = 0.0
    while state.withLock({ ($0.inFlight[moduleID] ?? 0) > own }) {
      if waited >= limit { return false }
      usleep(1000)
      waited += 0.001
    }
    return true
  }
}

/// How deeply the current thread is nested in deliveries, so that modules answering each other
/// cannot recurse until the stack runs out.
enum DeliveryDepth {
  static let limit = 16
  private static let key: pthread_key_t = {
    var k = pthread_key_t()
    pthread_key_create(&k, nil)
    return k
  }()
  private static let perModule = Mutex<[String: pthread_key_t]>([:])

  static var current: Int { Int(bitPattern: pthread_getspecific(key)) }

  static func set(_ n: Int) { pthread_setspecific(key, UnsafeRawPointer(bitPattern: n)) }

  /// Deliveries to `moduleID` on this thread right now (for `quiesce`).
  static func current(for moduleID: String) -> Int {
    guard let k = perModule.withLock({ $0[moduleID] }) else { return 0 }
    return Int(bitPattern: pthread_getspecific(k))
  }

  static func with<T>(_ moduleID: String, _ body: () -> T) -> T? {
    let depth = current
    guard depth < limit else { return nil }
    let k = perModule.withLock { m -> pthread_key_t in
      if let k = m[moduleID] { return k }
      var k = pthread_key_t()
      pthread_key_create(&k, nil)
      m[moduleID] = k
      return k
    }
    let mine = Int(bitPattern: pthread_getspecific(k))
    set(depth + 1)
    pthread_setspecific(k, UnsafeRawPointer(bitPattern: mine + 1))
    defer {
      set(depth)
      pthread_setspecific(k, UnsafeRawPointer(bitPattern: mine))
    }
    return body()
  }
}

/// Publish/subscribe between modules. The publisher's identity comes from its binding; a
/// subscription belongs to the module that made it and ends when that module stops.
public final class EventBus: Sendable {
  struct Subscription: Sendable {
    var id: Int64
    var moduleID: String
    var eventType: String
    var target: DeliveryTarget<forsetti_event_handler>
  }

  private let state = Mutex<(next: Int64, subscriptions: [Subscription])>((1, []))
  let gate = DeliveryGate()

  /// Prefix reserved for the host's own events and messages.
  public static let reservedPrefix = "forsetti.internal."
  public static let maxPayload = 64 * 1024
  /// Subscriptions one module may hold.
  public static let maxSubscriptionsPerModule = 256

  public init() {}

  /// A new subscription ID, or a negative status (module closed, too many subscriptions).
  func subscribe(moduleID: String, eventType: String, target: DeliveryTarget<forsetti_event_handler>) -> Int64
  {
    guard !gate.isClosed(moduleID) else { return Int64(FORSETTI_ERR_REVOKED) }
    return state.withLock { s in
      guard s.subscriptions.lazy.filter({ $0.moduleID == moduleID }).count < Self.maxSubscriptionsPerModule
      else {
        return Int64(FORSETTI_ERR_TOO_LARGE)
      }
      let id = s.next
      s.next += 1
      s.subscriptions.append(Subscription(id: id, moduleID: moduleID, eventType: eventType, target: target))
      return id
    }
  }

  /// Ends subscription `id` if `moduleID` made it.
  func unsubscribe(moduleID: String, id: Int64) -> Bool {
    state.withLock { s in
      guard let i = s.subscriptions.firstIndex(where: { $0.id == id && $0.moduleID == moduleID }) else {
        return false
      }
      s.subscriptions.remove(at: i)
      return true
    }
  }

  /// Removes every subscription of a stopping module.
  public func removeAll(moduleID: String) {
    state.withLock { s in s.subscriptions.removeAll { $0.moduleID == moduleID } }
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
    guard DeliveryDepth.current < DeliveryDepth.limit else { return nil }
    let targets = state.withLock { s in
      s.subscriptions.filter { $0.eventType == eventType || $0.eventType == "*" }
    }
    var delivered = 0
    for t in targets where gate.enter(t.moduleID) {
      defer { gate.leave(t.moduleID) }
      _ = DeliveryDepth.with(t.moduleID) {
        switch t.target {
        case .local(let c):
          source.withCString { src in
            eventType.withCString { type in c.function(c.context, src, type, payload, length) }
          }
        case .remote(let forward):
          forward(source, eventType, UnsafeRawBufferPointer(start: payload, count: length))
        }
      }
      delivered += 1
    }
    return delivered
  }
}

/// Direct messages: one handler per module; the sender is always the bound module.
public final class MessageRouter: Sendable {
  private let handlers = Mutex<[String: DeliveryTarget<forsetti_message_handler>]>([:])
  let gate = DeliveryGate()

  public init() {}

  func setHandler(moduleID: String, _ target: DeliveryTarget<forsetti_message_handler>?) -> Bool {
    guard !gate.isClosed(moduleID) || target == nil else { return false }
    handlers.withLock { $0[moduleID] = target }
    return true
  }

  public func removeHandler(moduleID: String) { handlers.withLock { $0[moduleID] = nil } }

  public enum Delivery: Sendable { case delivered, noHandler, tooDeep }

  /// Delivers to the target's handler.
  func deliver(from sender: String, to target: String, type: String, payload: UnsafeRawPointer?, length: Int)
    -> Delivery
  {
    guard let h = handlers.withLock({ $0[target] }), gate.enter(target) else { return .noHandler }
    defer { gate.leave(target) }
    let done: Bool? = DeliveryDepth.with(target) {
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
