import CForsetti
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

  /// Prefix reserved for the host's own events and messages.
  public static let reservedPrefix = "forsetti.internal."
  public static let maxPayload = 64 * 1024

  public init() {}

  func subscribe(moduleID: String, eventType: String, target: DeliveryTarget<forsetti_event_handler>) -> Int64
  {
    state.withLock { s in
      let id = s.next
      s.next += 1
      s.subscriptions.append(
        Subscription(id: id, moduleID: moduleID, eventType: eventType, target: target))
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

  /// Removes every subscription of a stopped module.
  public func removeAll(moduleID: String) {
    state.withLock { s in s.subscriptions.removeAll { $0.moduleID == moduleID } }
  }

  /// How many subscriptions `moduleID` holds.
  public func subscriptionCount(moduleID: String) -> Int {
    state.withLock { s in s.subscriptions.filter { $0.moduleID == moduleID }.count }
  }

  /// Delivers to a snapshot of the matching subscribers, outside the lock, so a handler may
  /// publish or subscribe in turn. Returns how many handlers were called.
  @discardableResult
  func publish(from source: String, eventType: String, payload: UnsafeRawPointer?, length: Int) -> Int {
    let targets = state.withLock { s in
      s.subscriptions.filter { $0.eventType == eventType || $0.eventType == "*" }
    }
    source.withCString { src in
      eventType.withCString { type in
        for t in targets {
          switch t.target {
          case .local(let c): c.function(c.context, src, type, payload, length)
          case .remote(let forward):
            forward(source, eventType, UnsafeRawBufferPointer(start: payload, count: length))
          }
        }
      }
    }
    return targets.count
  }
}

/// Direct messages: one handler per module; the sender is always the bound module.
public final class MessageRouter: Sendable {
  private let handlers = Mutex<[String: DeliveryTarget<forsetti_message_handler>]>([:])

  public init() {}

  func setHandler(moduleID: String, _ target: DeliveryTarget<forsetti_message_handler>?) {
    handlers.withLock { $0[moduleID] = target }
  }

  public func removeHandler(moduleID: String) { handlers.withLock { $0[moduleID] = nil } }

  /// Delivers to the target's handler; false when it has none (not running, or no handler).
  func deliver(from sender: String, to target: String, type: String, payload: UnsafeRawPointer?, length: Int)
    -> Bool
  {
    guard let h = handlers.withLock({ $0[target] }) else { return false }
    switch h {
    case .local(let c):
      sender.withCString { s in type.withCString { t in c.function(c.context, s, t, payload, length) } }
    case .remote(let forward): forward(sender, type, UnsafeRawBufferPointer(start: payload, count: length))
    }
    return true
  }
}
