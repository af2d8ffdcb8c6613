import CForsettiWeb
import Dispatch
import ForsettiRuntime
import Synchronization

/// The debug page's `/api` requests waiting for the host's thread. Each one's connection is
/// suspended (out of the server's event loop) while a queue of its own asks the host, so a
/// busy host holds no server thread: the page and its event streams keep being served. Answered,
/// the connection is resumed and the handler, called again for the same request, sends it.
/// When the server stops, every waiting request is answered "the host is stopping" at once (the
/// server cannot stop while a connection is suspended, and the host's thread no longer serves).
final class WebAsks: Sendable {
  enum Entry {
    /// Asked; the connection (its address) is suspended.
    case waiting(UInt)
    case answered(DebugScreen.Reply)
    /// The server stopped before the host answered.
    case abandoned
  }

  private struct State {
    var entries: [UInt64: Entry] = [:]
    var stopped = false
  }

  /// Suspending and resuming happen under this lock, so an answer never resumes a connection
  /// before it is suspended.
  private let state = Mutex(State())
  /// One request at a time: the host's thread serves them one by one anyway, and a blocked
  /// question holds one thread, never the pool's.
  private let queue = DispatchQueue(label: "forsetti.debug-screen.api")

  /// What the handler does with `request`, called again after its connection was resumed: the
  /// entry if it has one (and forgets it unless it still waits), nil the first time.
  func take(_ request: UInt64) -> Entry? {
    state.withLock { s in
      guard let e = s.entries[request] else { return nil }
      if case .waiting = e { return e }
      s.entries[request] = nil
      return e
    }
  }

  /// Suspends `connection` and asks `ask` on the queue; false when the server stops (answer
  /// at once instead).
  func start(
    _ request: UInt64, connection: OpaquePointer, answer: @escaping @Sendable () -> DebugScreen.Reply
  ) -> Bool {
    let started = state.withLock { s -> Bool in
      guard !s.stopped else { return false }
      forsetti_web_suspend(connection)
      s.entries[request] = .waiting(UInt(bitPattern: connection))
      return true
    }
    guard started else { return false }
    queue.async { [self] in
      let reply = answer()
      state.withLock { s in
        guard case .waiting(let address) = s.entries[request], let c = OpaquePointer(bitPattern: address)
        else {
          return
        }
        s.entries[request] = .answered(reply)
        forsetti_web_resume(c)
      }
    }
    return true
  }

  /// Answers every waiting request "stopping" and takes no more.
  func stop() {
    state.withLock { s in
      s.stopped = true
      for (request, e) in s.entries {
        guard case .waiting(let address) = e, let c = OpaquePointer(bitPattern: address) else { continue }
        s.entries[request] = .abandoned
        forsetti_web_resume(c)
      }
    }
  }
}
