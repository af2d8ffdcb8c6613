import CForsettiWeb
import Dispatch
import ForsettiCore
import ForsettiRuntime
import Synchronization

/// What the debug screen's open pages hear, as server-sent events: module state changes, log
/// lines, reload lines. Each page has a queue of its own, bounded: a page that stops reading
/// loses its oldest events, never the host's memory. At most `WebLimits.streams` pages listen at
/// once. A stream with nothing to send is suspended (out of the server's event loop, costing no
/// thread) and resumed when something is published, or by the keep-alive every `keepAlive`
/// seconds, which is also how a page that went away is noticed (its write fails).
final class WebEvents: Sendable {
  private struct Subscriber {
    var pending: [UInt8] = []
    /// The stream's connection while it is suspended (its address), nil while it is served.
    var parked: UInt? = nil
  }

  private struct State {
    var subscribers: [UInt64: Subscriber] = [:]
    var nextID: UInt64 = 1
    var stopped = false
  }

  /// Deciding to suspend and resuming happen under this lock, so an event published between
  /// "nothing to send" and "suspended" is never missed.
  private let state = Mutex(State())
  private let ticker = DispatchSemaphore(value: 0)
  let maxStreams: Int
  /// Bytes kept for one page that has not read them.
  static let maxPending = 256 * 1024
  /// Seconds between keep-alive comments.
  static let keepAlive = 15

  private let ticking = Atomic<Bool>(false)

  init(maxStreams: Int = WebLimits.streams) { self.maxStreams = maxStreams }

  /// A new subscriber's ID; nil when `maxStreams` are open (or the server stops).
  func subscribe() -> UInt64? {
    // The keep-alive runs from the first page on (a host without --ui never starts it).
    if !ticking.exchange(true, ordering: .acquiringAndReleasing) {
      DispatchQueue.global().async { [self] in
        while ticker.wait(timeout: .now() + .seconds(Self.keepAlive)) == .timedOut {
          send(Array(": keep-alive\n\n".utf8))
        }
      }
    }
    return state.withLock { s -> UInt64? in
      guard !s.stopped, s.subscribers.count < maxStreams else { return nil }
      let id = s.nextID
      s.nextID += 1
      s.subscribers[id] = Subscriber()
      return id
    }
  }

  /// Pages listening now.
  var count: Int { state.withLock { $0.subscribers.count } }

  func unsubscribe(_ id: UInt64) { _ = state.withLock { $0.subscribers.removeValue(forKey: id) } }

  /// Sends `event` with `data` (one JSON line) to every page.
  func publish(_ event: String, _ data: JSONValue) {
    send(Array("event: \(event)\ndata: \(JSONWriter.string(data))\n\n".utf8))
  }

  private func send(_ bytes: [UInt8]) {
    state.withLock { s in
      for key in s.subscribers.keys {
        guard var sub = s.subscribers[key] else { continue }
        sub.pending += bytes
        if sub.pending.count > Self.maxPending {
          sub.pending.removeFirst(sub.pending.count - Self.maxPending)
        }
        if let parked = sub.parked, let connection = OpaquePointer(bitPattern: parked) {
          forsetti_web_resume(connection)
          sub.parked = nil
        }
        s.subscribers[key] = sub
      }
    }
  }

  /// What the server does next for page `id` on `connection`.
  enum Next {
    case bytes([UInt8])
    /// Nothing to send: the connection is suspended until there is.
    case suspended
    /// The page or the server is gone.
    case end
  }

  /// The next bytes for page `id`, at most `max`; with none, suspends `connection`.
  func next(_ id: UInt64, connection: OpaquePointer, max: Int) -> Next {
    state.withLock { s -> Next in
      guard !s.stopped, var sub = s.subscribers[id] else { return .end }
      if sub.pending.isEmpty {
        forsetti_web_suspend(connection)
        sub.parked = UInt(bitPattern: connection)
        s.subscribers[id] = sub
        return .suspended
      }
      let chunk = Array(sub.pending.prefix(max))
      sub.pending.removeFirst(chunk.count)
      s.subscribers[id] = sub
      return .bytes(chunk)
    }
  }

  /// Ends every stream: each suspended one is resumed to end (the server cannot stop while a
  /// connection is suspended), and none is suspended again.
  func stop() {
    ticker.signal()
    state.withLock { s in
      s.stopped = true
      for key in s.subscribers.keys {
        if let parked = s.subscribers[key]?.parked, let connection = OpaquePointer(bitPattern: parked) {
          forsetti_web_resume(connection)
          s.subscribers[key]?.parked = nil
        }
      }
    }
  }
}

/// Log lines to the debug screen's pages: the message escaped by the module-text rule, as the
/// host's log shows it, and `origin` saying whose text it is (`module` for a module's own line,
/// `host` for the host's), decided by the host, so the page can mark a module's line as its.
final class WebLogSink: LogSink {
  let events: WebEvents
  init(_ events: WebEvents) { self.events = events }

  func write(_ record: LogRecord) {
    events.publish(
      "log",
      .object(
        JSONObject([
          ("moduleID", .string(orNull: record.moduleID)), ("level", .string(record.level.name)),
          ("origin", .string(record.origin == .module ? "module" : "host")),
          ("message", .string(ModuleText.visible(record.message))),
        ])))
  }
}
