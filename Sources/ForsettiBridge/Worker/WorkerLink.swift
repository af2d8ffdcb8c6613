import CForsetti
import Dispatch
import ForsettiCore
import Glibc
import Synchronization

/// The worker's side of the host API: the same `HostBackend` the in-process bridge uses, but
/// every call crosses to the host on the call ring, which attributes it to this worker's module
/// by the connection alone — except a role call of a provider in another worker, which goes on
/// the channel the host opened to that worker, so it never holds the ring. Calls go over their
/// own channel and are answered in order; events and messages from the host arrive on the other
/// and are delivered on a separate queue, so a handler may call the host in turn.
package final class WorkerLink: HostBackend {
  package let socket: WireSocket
  private let nextID = Atomic<UInt64>(1)
  private let eventHandlers = Mutex<[Int64: ModuleCallback<forsetti_event_handler>]>([:])
  private let messageHandler = Mutex<ModuleCallback<forsetti_message_handler>?>(nil)
  /// The provider's side of the role this module serves, once it serves (`RoleServer`).
  private let server = Mutex<RoleServer?>(nil)
  /// The channels the host opened to the providers of the roles this module calls.
  private let channels = SleepingLock<[DefaultModuleRole: RoleChannel]>([:])
  private let deliveries = DispatchQueue(label: "forsetti.worker.deliveries")
  /// Lifecycle commands from the host, for the worker's main thread.
  package let commands = Mailbox()

  /// The synchronous channel (shared memory with the host), one calling thread at a time.
  package let calls: CallRing
  /// Taken for the whole of a call: the ring has one request slot, and `response` is its copy.
  private let callLock = SleepingLock<Void>(())
  private let response = AnswerBuffer()

  package init(socket: WireSocket, calls: CallRing) {
    self.socket = socket
    self.calls = calls
  }

  /// Sends a request written by `fill` and blocks until its response; the status it carries.
  ///
  /// The calling thread itself writes the request into the ring and waits for the answer
  /// (threads take turns), so no thread hand-off happens on this side, and the frame is written
  /// straight into shared memory and read back in place: a call allocates nothing for framing.
  package func status(_ kind: WireKind, _ fill: (inout WireWriter) -> Void) -> Int64 {
    exchange(kind, fill, unsent: Int64(FORSETTI_ERR_IO), malformed: Int64(FORSETTI_ERR_IO)) { f in
      f.kind == .response ? f.int(0) : nil
    }
  }

  /// One call on the ring: the request written by `fill`, the answer (with the request's ID)
  /// read by `read`; `unsent` when the request does not fit, `malformed` when the answer is
  /// not one. Threads take turns: the ring has one request slot, and `response` is its copy.
  private func exchange<T: Sendable>(
    _ kind: WireKind, _ fill: (inout WireWriter) -> Void, unsent: T, malformed: T, _ read: (WireView) -> T?
  ) -> T {
    let id = nextID.add(1, ordering: .relaxed).newValue
    return callLock.withLock { _ -> T in
      let buffer = response.bytes
      var fits = true
      let n = calls.call(
        encoding: { slot in
          var w = WireWriter(into: slot, kind: kind, id: id)
          fill(&w)
          fits = w.length != nil
          return w.length
        }, response: buffer)
      guard fits else { return unsent }
      // No answer means the host is gone: nothing may outlive it.
      guard let n else { _exit(0) }
      guard let f = try? WireView(UnsafeRawBufferPointer(rebasing: buffer[0..<n])), f.id == id else {
        return malformed
      }
      return read(f) ?? malformed
    }
  }

  /// Runs on the reader thread until the host closes the socket.
  package func readLoop() {
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Wire.maxFrame, alignment: 8)
    defer { buffer.deallocate() }
    while true {
      var fd: Int32 = -1
      let received = socket.receive(into: buffer, descriptor: &fd)
      if case .frame(let f) = received, f.kind == .roleChannel, fd >= 0 { openChannel(f, fd) }
      // The mapping outlives the descriptor; one that came with anything else is not kept.
      if fd >= 0 { close(fd) }
      switch received {
      case .closed, .malformed:
        // The host is gone (or broken): nothing may outlive it.
        _exit(0)
      case .frame(let f):
        handle(f)
      }
    }
  }

  /// Maps a role channel the host sent: the provider's end is watched by a thread handing its
  /// calls to the handlers, as the consumer the host named; the consumer's end is kept for its
  /// calls of the role.
  private func openChannel(_ f: WireFrame, _ fd: Int32) {
    guard let end = f.int(0), let label = f.string(1), let ring = ChannelRing.attach(fd: fd) else {
      return
    }
    if end == 0 {
      guard let server = server.withLock({ $0 }) else { return ring.close() }
      server.serveChannel(ring, label: label)
    } else if let role = DefaultModuleRole(rawValue: label),
      let index = DefaultModuleRole.allCases.firstIndex(of: role)
    {
      channels.withLock { $0[role] = RoleChannel(ring, role: index, progress: calls.progress) }
    }
  }

  private func handle(_ f: WireFrame) {
    switch f.kind {
    case .deliverEvent:
      guard let sub = f.int(0), let source = f.string(1), let type = f.string(2), let payload = f.bytes(3),
        let h = eventHandlers.withLock({ $0[sub] })
      else { return }
      deliveries.async {
        source.withCString { s in
          type.withCString { t in
            payload.withUnsafeBytes { h.function(h.context, s, t, $0.baseAddress, $0.count) }
          }
        }
      }
    case .deliverMessage:
      guard let sender = f.string(0), let type = f.string(1), let payload = f.bytes(2),
        let h = messageHandler.withLock({ $0 })
      else { return }
      deliveries.async {
        sender.withCString { s in
          type.withCString { t in
            payload.withUnsafeBytes { h.function(h.context, s, t, $0.baseAddress, $0.count) }
          }
        }
      }
    case .start, .stop, .saveState, .confirmStart:
      commands.post(f)
    default:
      break
    }
  }

  // MARK: HostBackend

  package func log(moduleID: String, level: LogLevel, message: String, metadata: [String: String]) {
    socket.send(WireFrame(.log, [.int(Int64(level.rawValue)), .string(message)]))
  }

  package func telemetry(moduleID: String, name: String, attributes: JSONValue?) -> Bool {
    socket.send(
      WireFrame(.telemetry, [.string(name), .string(attributes.map { JSONWriter.string($0) } ?? "")]))
    return true
  }

  package func publish(from moduleID: String, type: String, payload: UnsafeRawBufferPointer) -> Int32 {
    Int32(
      truncatingIfNeeded: status(.publish) {
        $0.string(type)
        $0.bytes(payload)
      })
  }

  package func subscribe(moduleID: String, type: String, handler: ModuleCallback<forsetti_event_handler>)
    -> Int64
  {
    let id = status(.subscribe) { $0.string(type) }
    if id > 0 { eventHandlers.withLock { $0[id] = handler } }
    return id
  }

  package func unsubscribe(moduleID: String, id: Int64) -> Int32 {
    let s = Int32(truncatingIfNeeded: status(.unsubscribe) { $0.int(id) })
    if s == FORSETTI_OK { eventHandlers.withLock { _ = $0.removeValue(forKey: id) } }
    return s
  }

  package func send(from moduleID: String, to target: String, type: String, payload: UnsafeRawBufferPointer)
    -> Int32
  {
    Int32(
      truncatingIfNeeded: status(.send) {
        $0.string(target)
        $0.string(type)
        $0.bytes(payload)
      })
  }

  package func setHandler(moduleID: String, handler: ModuleCallback<forsetti_message_handler>?) -> Int32 {
    messageHandler.withLock { $0 = handler }
    return Int32(truncatingIfNeeded: status(.setHandler) { $0.int(handler == nil ? 0 : 1) })
  }

  /// A role call holds only its caller's thread: it goes on the consumer's own channel to the
  /// provider's worker, which the host opens on a quick `roleConnect` (never waiting on the
  /// provider), so the call ring, and with it the module's other host calls, is never held for
  /// a provider's answer. Only a provider in the host's process is called through the host.
  /// A role already on the path of the call this thread answers is refused before anything is
  /// sent: a cycle; so is, by the host, a call left queued that closes a cycle of busy modules.
  package func callRole(
    _ role: Int64, method: String, request: UnsafeRawBufferPointer, response: UnsafeMutableRawPointer?,
    capacity: Int, length: UnsafeMutablePointer<Int>, from caller: ModuleCaller, path: RolePath
  ) -> Int32 {
    guard let index = Int(exactly: role), DefaultModuleRole.allCases.indices.contains(index) else {
      return FORSETTI_ERR_INVALID_ARGUMENT
    }
    let r = DefaultModuleRole.allCases[index]
    // Its own role is refused by the host as in-process (FORSETTI_ERR_DENIED), not as a cycle.
    guard !path.contains(index) || caller.serves == r else { return FORSETTI_ERR_CALL_CYCLE }
    // Twice at most: a channel closed under the call (the provider stopped) is asked for again,
    // and the host says what became of the role.
    for _ in 0..<2 {
      if let channel = channels.withLock({ $0[r] }) {
        let outcome = channel.call(
          method: method, request: request, response: response, capacity: capacity, length: length,
          path: path
        ) { lane in
          self.service(
            ServiceRequest(.roleWaiting, number: role, [[UInt8(truncatingIfNeeded: lane)]]), from: caller
          )
          .status
        }
        switch outcome {
        case .answered(let status):
          return status
        case .timedOut:
          // The host judges the provider's progress itself; this report only says when to look.
          _ = service(ServiceRequest(.roleStalled, number: role), from: caller)
          return FORSETTI_ERR_TIMEOUT
        case .closed:
          channels.withLock { if $0[r] === channel { $0[r] = nil } }
        }
      }
      let status = service(ServiceRequest(.roleConnect, number: role), from: caller).status
      if status == FORSETTI_ERR_NOT_FOUND {
        return relayRoleCall(
          role, method: method, request: request, response: response, capacity: capacity, length: length,
          from: caller, path: path)
      }
      guard status == FORSETTI_OK else { return status }
      guard awaitChannel(r, until: path.deadline) else { return FORSETTI_ERR_UNAVAILABLE }
    }
    return FORSETTI_ERR_UNAVAILABLE
  }

  /// Waits for the reader thread to map the channel to `role` the host has just sent (it went
  /// on the socket before the host's answer on the ring): a short poll, once per channel.
  private func awaitChannel(_ role: DefaultModuleRole, until deadline: UInt64) -> Bool {
    var pause: UInt32 = 20
    while true {
      if let c = channels.withLock({ $0[role] }), !c.isClosed { return true }
      if CallRing.nanoseconds() >= deadline { return false }
      usleep(pause)
      pause = min(pause * 2, 2000)
    }
  }

  package func service(_ request: ServiceRequest, from caller: ModuleCaller) -> ServiceReply {
    exchange(
      .service, { request.write(&$0) }, unsent: .status(FORSETTI_ERR_TOO_LARGE),
      malformed: .status(FORSETTI_ERR_IO)
    ) { ServiceReply($0, capacity: request.capacity) }
  }

  package func serveRole(
    _ caller: ModuleCaller, handler: ModuleCallback<forsetti_role_handler>?, concurrency: Int
  ) -> Int32 {
    guard let role = caller.serves, let index = DefaultModuleRole.allCases.firstIndex(of: role) else {
      return FORSETTI_ERR_DENIED
    }
    // Off at once, locally too; on only once the host agreed (a refused handler must not answer
    // calls meant for the role's provider in force).
    if handler == nil { server.withLock { $0 }?.withdraw(limit: 0) }
    let reply = service(
      ServiceRequest(
        .roleServe, number: handler == nil ? 0 : Int64(concurrency),
        [Array(role.rawValue.utf8), [UInt8(index)]]),
      from: caller)
    if let handler, reply.status == FORSETTI_OK {
      let s = server.withLock { s -> RoleServer in
        if let s { return s }
        let made = RoleServer(role: index, progress: calls.progress)
        s = made
        return made
      }
      s.serve(handler, concurrency: concurrency)
      if let ring = calls.serves { s.serveRing(ring) }
    }
    return reply.status
  }

  /// Takes the role handler away and waits for the calls running in it: called by the worker's
  /// main thread before the module's `stop`, so no handler runs during or after it.
  package func stopServing() {
    server.withLock { $0 }?.withdraw()
  }

  package func moduleStarting(moduleID: String) {}

  package func moduleStopping(moduleID: String) {}

  package func moduleStopped(moduleID: String) {
    eventHandlers.withLock { $0.removeAll() }
    messageHandler.withLock { $0 = nil }
    server.withLock { $0 }?.withdraw(limit: 0)
  }
}

/// A queue of frames for one consumer thread, with a timed wait.
package final class Mailbox: Sendable {
  package init() {}

  private let items = Mutex<[WireFrame]>([])
  private let ready = DispatchSemaphore(value: 0)

  package func post(_ f: WireFrame) {
    items.withLock { $0.append(f) }
    ready.signal()
  }

  /// The next frame, or nil after `timeout` seconds (nil timeout waits forever).
  package func next(timeout: Double?) -> WireFrame? {
    if let timeout {
      guard ready.wait(timeout: .now() + timeout) == .success else { return nil }
    } else {
      ready.wait()
    }
    return items.withLock { $0.isEmpty ? nil : $0.removeFirst() }
  }
}
