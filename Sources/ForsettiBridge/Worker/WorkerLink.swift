import CForsetti
import Dispatch
import ForsettiCore
import Glibc
import Synchronization

/// The worker's side of the host API: the same `HostBackend` the in-process bridge uses, but
/// every call crosses a socket to the host, which attributes it to this worker's module by the
/// connection alone. Calls go over their own channel and are answered in order; events and
/// messages from the host arrive on the other and are delivered on a separate queue, so a
/// handler may call the host in turn.
package final class WorkerLink: HostBackend {
  package let socket: WireSocket
  private let nextID = Atomic<UInt64>(1)
  private let eventHandlers = Mutex<[Int64: ModuleCallback<forsetti_event_handler>]>([:])
  private let messageHandler = Mutex<ModuleCallback<forsetti_message_handler>?>(nil)
  private let roleHandler = Mutex<ModuleCallback<forsetti_role_handler>?>(nil)
  /// Whether the serve-ring thread runs.
  private let serving = Mutex<Bool>(false)
  private let deliveries = DispatchQueue(label: "forsetti.worker.deliveries")
  /// Lifecycle commands from the host, for the worker's main thread.
  package let commands = Mailbox()

  /// The synchronous channel (shared memory with the host), one calling thread at a time.
  package let calls: CallRing
  /// Taken for the whole of a call: the ring has one request slot, and `response` is its copy.
  private let callLock = Mutex<Void>(())
  private let response = CallBuffer(byteCount: CallRing.capacity)

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
    let id = nextID.add(1, ordering: .relaxed).newValue
    return callLock.withLock { _ -> Int64 in
      let buffer = response.bytes
      var fits = true
      let n = calls.call(
        encoding: { slot in
          var w = WireWriter(into: slot, kind: kind, id: id)
          fill(&w)
          fits = w.length != nil
          return w.length
        }, response: buffer)
      guard fits else { return Int64(FORSETTI_ERR_IO) }
      // No answer means the host is gone: nothing may outlive it.
      guard let n else { _exit(0) }
      guard let f = try? WireView(UnsafeRawBufferPointer(rebasing: buffer[0..<n])), f.kind == .response,
        f.id == id, let status = f.int(0)
      else { return Int64(FORSETTI_ERR_IO) }
      return status
    }
  }

  /// Runs on the reader thread until the host closes the socket.
  package func readLoop() {
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Wire.maxFrame, alignment: 8)
    defer { buffer.deallocate() }
    while true {
      switch socket.receive(into: buffer) {
      case .closed, .malformed:
        // The host is gone (or broken): nothing may outlive it.
        _exit(0)
      case .frame(let f):
        handle(f)
      }
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
    case .start, .stop, .saveState:
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

  package func service(_ request: ServiceRequest, from caller: ModuleCaller) -> ServiceReply {
    let id = nextID.add(1, ordering: .relaxed).newValue
    return callLock.withLock { _ -> ServiceReply in
      let buffer = response.bytes
      var fits = true
      let n = calls.call(
        encoding: { slot in
          var w = WireWriter(into: slot, kind: .service, id: id)
          request.write(&w)
          fits = w.length != nil
          return w.length
        }, response: buffer)
      guard fits else { return .status(FORSETTI_ERR_TOO_LARGE) }
      // No answer means the host is gone: nothing may outlive it.
      guard let n else { _exit(0) }
      guard let f = try? WireView(UnsafeRawBufferPointer(rebasing: buffer[0..<n])), f.id == id else {
        return .status(FORSETTI_ERR_IO)
      }
      return ServiceReply(f, capacity: request.capacity)
    }
  }

  package func serveRole(_ caller: ModuleCaller, handler: ModuleCallback<forsetti_role_handler>?) -> Int32 {
    guard let role = caller.serves, let index = DefaultModuleRole.allCases.firstIndex(of: role) else {
      return FORSETTI_ERR_DENIED
    }
    roleHandler.withLock { $0 = handler }
    if handler != nil { startServing() }
    let reply = service(
      ServiceRequest(
        .roleServe, number: handler == nil ? 0 : 1, [Array(role.rawValue.utf8), [UInt8(index)]]),
      from: caller)
    return reply.status
  }

  /// Starts the thread that answers the host's calls on the serve ring, once.
  private func startServing() {
    let first = serving.withLock { started -> Bool in
      defer { started = true }
      return !started
    }
    guard first, let ring = calls.serves else { return }
    _ = DetachedThread.start { [self] in
      ring.serve { request, slot in self.answerRoleCall(request, into: slot) }
    }
  }

  /// Runs the role handler for one `serveCall` from the host and writes its `response`.
  private func answerRoleCall(_ bytes: UnsafeRawBufferPointer, into slot: UnsafeMutableRawBufferPointer)
    -> Int
  {
    var reply = ServiceReply(FORSETTI_ERR_UNAVAILABLE)
    var id: UInt64 = 0
    if let f = try? WireView(bytes), f.kind == .serveCall, let call = RoleCall(f) {
      id = f.id
      if let h = roleHandler.withLock({ $0 }) { reply = call.run(h) }
    }
    var w = WireWriter(into: slot, kind: .response, id: id)
    reply.write(&w)
    return w.length ?? 0
  }

  package func moduleStarting(moduleID: String) {}

  package func moduleStopping(moduleID: String) {}

  package func moduleStopped(moduleID: String) {
    eventHandlers.withLock { $0.removeAll() }
    messageHandler.withLock { $0 = nil }
    roleHandler.withLock { $0 = nil }
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

/// The worker's copy of a call's response: memory that lives as long as the link.
private final class CallBuffer: @unchecked Sendable {
  // @unchecked: `bytes` is read and written only while WorkerLink's call lock is held.
  let bytes: UnsafeMutableRawBufferPointer
  init(byteCount: Int) { bytes = .allocate(byteCount: byteCount, alignment: 8) }
  deinit { bytes.deallocate() }
}
