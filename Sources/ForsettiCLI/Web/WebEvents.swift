import Dispatch
import ForsettiCore
import ForsettiRuntime
import Synchronization

/// What the debug screen's open pages hear, as server-sent events: module state changes, log
/// lines, reload lines. Each page has a queue of its own, bounded: a page that stops reading
/// loses its oldest events, never the host's memory.
final class WebEvents: Sendable {
  private struct Subscriber {
    var pending: [UInt8] = []
    let signal = DispatchSemaphore(value: 0)
  }

  private let subscribers = Mutex<[UInt64: Subscriber]>([:])
  private let nextID = Atomic<UInt64>(1)
  private let stopped = Atomic<Bool>(false)
  /// Bytes kept for one page that has not read them.
  static let maxPending = 256 * 1024
  /// Seconds between keep-alive comments on a quiet stream.
  static let keepAlive = 15

  /// A new subscriber's ID.
  func subscribe() -> UInt64 {
    let id = nextID.add(1, ordering: .relaxed).oldValue
    subscribers.withLock { $0[id] = Subscriber() }
    return id
  }

  func unsubscribe(_ id: UInt64) { _ = subscribers.withLock { $0.removeValue(forKey: id) } }

  /// Sends `event` with `data` (one JSON line) to every page.
  func publish(_ event: String, _ data: JSONValue) {
    let bytes = Array("event: \(event)\ndata: \(JSONWriter.string(data))\n\n".utf8)
    let signals = subscribers.withLock { all -> [DispatchSemaphore] in
      for key in all.keys {
        all[key]?.pending += bytes
        if let n = all[key]?.pending.count, n > Self.maxPending {
          all[key]?.pending.removeFirst(n - Self.maxPending)
        }
      }
      return all.values.map(\.signal)
    }
    for s in signals { s.signal() }
  }

  /// The next bytes for page `id`, at most `max`: waits for some, sends a keep-alive comment
  /// after a quiet while; nil once the page or the server is gone.
  func next(_ id: UInt64, max: Int) -> [UInt8]? {
    while true {
      guard !stopped.load(ordering: .acquiring) else { return nil }
      let (ready, signal) = subscribers.withLock { all -> ([UInt8]?, DispatchSemaphore?) in
        guard var s = all[id] else { return (nil, nil) }
        guard !s.pending.isEmpty else { return ([], s.signal) }
        let chunk = Array(s.pending.prefix(max))
        s.pending.removeFirst(chunk.count)
        all[id] = s
        return (chunk, s.signal)
      }
      guard let ready, let signal else { return nil }
      if !ready.isEmpty { return ready }
      if signal.wait(timeout: .now() + .seconds(Self.keepAlive)) == .timedOut {
        return Array(": keep-alive\n\n".utf8)
      }
    }
  }

  /// Ends every stream.
  func stop() {
    stopped.store(true, ordering: .releasing)
    let signals = subscribers.withLock { $0.values.map(\.signal) }
    for s in signals { s.signal() }
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
