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
  private let roleHandler = Mutex<ModuleCallback<forsetti_role_handler>?>(nil)
  /// The index of the role this module serves (`DefaultModuleRole.allCases`), once it serves.
  private let servedRole = Atomic<Int>(-1)
  /// Held while the role handler runs: calls from the host's serve ring and from every
  /// channel take turns.
  private let handlerTurn = Mutex<Void>(())
  private let handlerScratch = HandlerScratch()
  /// The channels the host opened to the providers of the roles this module calls.
  private let channels = Mutex<[DefaultModuleRole: RoleChannel]>([:])
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

  /// Maps a role channel the host sent: the provider's end gets a thread answering it as the
  /// consumer the host named; the consumer's end is kept for its calls of the role.
  private func openChannel(_ f: WireFrame, _ fd: Int32) {
    guard let end = f.int(0), let label = f.string(1), let ring = CallRing.attachChannel(fd: fd) else {
      return
    }
    if end == 0 {
      _ = DetachedThread.start { [self] in
        ring.serve { request, slot in self.answerRoleCall(request, into: slot, caller: label) }
      }
    } else if let role = DefaultModuleRole(rawValue: label) {
      channels.withLock { $0[role] = RoleChannel(ring) }
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
  /// sent: a cycle.
  package func callRole(
    _ role: Int64, method: String, request: UnsafeRawBufferPointer, response: UnsafeMutableRawPointer?,
    capacity: Int, length: UnsafeMutablePointer<Int>, from caller: ModuleCaller
  ) -> Int32 {
    guard let index = Int(exactly: role), DefaultModuleRole.allCases.indices.contains(index) else {
      return FORSETTI_ERR_INVALID_ARGUMENT
    }
    let path = RolePath.current
    let r = DefaultModuleRole.allCases[index]
    // Its own role is refused by the host as in-process (FORSETTI_ERR_DENIED), not as a cycle.
    guard !path.contains(index) || caller.serves == r else { return FORSETTI_ERR_CALL_CYCLE }
    // Twice at most: a channel closed under the call (the provider stopped) is asked for again,
    // and the host says what became of the role.
    for _ in 0..<2 {
      if let channel = channels.withLock({ $0[r] }) {
        switch channel.call(
          method: method, request: request, response: response, capacity: capacity, length: length,
          path: path.forCall())
        {
        case .answered(let status):
          return status
        case .timedOut:
          // The host probes the provider itself; this report is only a hint.
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
          from: caller)
      }
      guard status == FORSETTI_OK else { return status }
      guard awaitChannel(r, until: path.deadlineFromNow()) else { return FORSETTI_ERR_UNAVAILABLE }
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

  package func serveRole(_ caller: ModuleCaller, handler: ModuleCallback<forsetti_role_handler>?) -> Int32 {
    guard let role = caller.serves, let index = DefaultModuleRole.allCases.firstIndex(of: role) else {
      return FORSETTI_ERR_DENIED
    }
    // Off at once, locally too; on only once the host agreed (a refused handler must not answer
    // calls meant for the role's provider in force).
    // (Not under the handler's turn: a handler may call `serve` itself.)
    if handler == nil { roleHandler.withLock { $0 = nil } }
    let reply = service(
      ServiceRequest(
        .roleServe, number: handler == nil ? 0 : 1, [Array(role.rawValue.utf8), [UInt8(index)]]),
      from: caller)
    if let handler, reply.status == FORSETTI_OK {
      servedRole.store(index, ordering: .relaxed)
      roleHandler.withLock { $0 = handler }
      startServing()
    }
    return reply.status
  }

  /// Takes the role handler away and waits for a call running in it: called by the worker's
  /// main thread before the module's `stop`, so no handler runs during or after it.
  package func stopServing() {
    handlerTurn.withLock { _ in roleHandler.withLock { $0 = nil } }
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

  /// Runs the role handler for one `serveCall` and writes its `response`. From the host's
  /// serve ring the frame names the caller; on a channel, `caller` (the host's label for the
  /// channel) does, whatever the frame says. One call runs the handler at a time, whichever
  /// ring it came on: the semantics of an in-process provider.
  private func answerRoleCall(
    _ bytes: UnsafeRawBufferPointer, into slot: UnsafeMutableRawBufferPointer, caller: String? = nil
  ) -> Int {
    guard let f = try? WireView(bytes) else {
      return Self.respond(slot, 0, ServiceReply(FORSETTI_ERR_INVALID_ARGUMENT))
    }
    // The host's probe (only on its serve ring): answered once the turn is this call's.
    if caller == nil, f.kind == .probe {
      handlerTurn.withLock { _ in }
      return Self.respond(slot, f.id, ServiceReply(FORSETTI_OK))
    }
    guard let call = RoleCall.Frame(f) else {
      return Self.respond(slot, 0, ServiceReply(FORSETTI_ERR_INVALID_ARGUMENT))
    }
    // In place, without copies: the scratch memory is this link's, used only under the turn.
    // The handler is read under the turn too: `stopServing` then waits for the call using it.
    return handlerTurn.withLock { _ -> Int in
      guard let h = roleHandler.withLock({ $0 }) else {
        return Self.respond(slot, f.id, ServiceReply(FORSETTI_ERR_UNAVAILABLE))
      }
      let scratch = handlerScratch
      guard let methodC = scratch.text(call.method), let callerC = scratch.caller(caller, call.caller) else {
        return Self.respond(slot, f.id, ServiceReply(FORSETTI_ERR_INVALID_ARGUMENT))
      }
      let out = UnsafeMutableRawBufferPointer(rebasing: scratch.response[0..<call.capacity])
      let (status, length) = RoleCall.run(
        h, caller: callerC, method: methodC, request: call.request, into: out,
        path: call.path.adding(servedRole.load(ordering: .relaxed)))
      var w = WireWriter(into: slot, kind: .response, id: f.id)
      w.int(Int64(status))
      w.int(Int64(length))
      w.bytes(
        status == FORSETTI_ERR_BUFFER_TOO_SMALL
          ? UnsafeRawBufferPointer(start: nil, count: 0) : UnsafeRawBufferPointer(rebasing: out[0..<length]))
      return w.length ?? 0
    }
  }

  private static func respond(_ slot: UnsafeMutableRawBufferPointer, _ id: UInt64, _ reply: ServiceReply)
    -> Int
  {
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

/// A consumer's end of a role channel: a ring of its own to its provider's worker, which the
/// host made after judging the consumer's first call of the role through itself, and closes
/// when either module stops. Calls on it take turns.
final class RoleChannel: Sendable {
  private let ring: CallRing
  private let turn = Mutex<Void>(())
  private let nextID = Atomic<UInt64>(0)
  private let response = CallBuffer(byteCount: CallRing.capacity)

  init(_ ring: CallRing) { self.ring = ring }

  var isClosed: Bool { ring.isClosed }

  /// How a call on the channel ended.
  enum Outcome {
    /// The provider's status (FORSETTI_ERR_IO for an answer that is not one).
    case answered(Int32)
    /// Not answered by the call's deadline (`path.deadline`).
    case timedOut
    /// The channel is closed: the call was not made, or was cut off (the host decides again).
    case closed
  }

  /// Calls the provider with the caller's own buffers, passing on `path` (the roles on the
  /// call's path and its deadline).
  func call(
    method: String, request: UnsafeRawBufferPointer, response: UnsafeMutableRawPointer?, capacity: Int,
    length: UnsafeMutablePointer<Int>, path: RolePath
  ) -> Outcome {
    guard !ring.isClosed else { return .closed }
    return turn.withLock { _ -> Outcome in
      // Its time went waiting behind this module's own calls: not sent (the provider would run
      // a call nobody waits for), and not the provider's fault, so not reported.
      guard CallRing.nanoseconds() < path.deadline else { return .answered(FORSETTI_ERR_TIMEOUT) }
      let id = nextID.add(1, ordering: .relaxed).newValue
      let buffer = self.response.bytes
      let n = ring.call(
        encoding: { slot in
          var w = WireWriter(into: slot, kind: .serveCall, id: id)
          // No caller: the provider's end of a channel is labelled with it by the host.
          RoleCall.write(&w, capacity: capacity, caller: "", method: method, request: request, path: path)
          return w.length
        }, response: buffer, deadline: path.deadline)
      guard let n else { return ring.isClosed ? .closed : .timedOut }
      guard let f = try? WireView(UnsafeRawBufferPointer(rebasing: buffer[0..<n])), f.id == id,
        let (status, count, bytes) = ServiceReply.check(f, capacity: capacity)
      else { return .answered(FORSETTI_ERR_IO) }
      if !bytes.isEmpty {
        guard let response, let src = bytes.baseAddress else { return .answered(FORSETTI_ERR_IO) }
        response.copyMemory(from: src, byteCount: bytes.count)
      }
      length.pointee = count
      return .answered(status)
    }
  }
}

/// Memory a provider's role handler runs in: the method and caller as C strings, the response.
/// Allocated once, for the life of the link.
private final class HandlerScratch: @unchecked Sendable {
  // @unchecked: used only while WorkerLink's handler turn is held, by one thread at a time.
  let response = UnsafeMutableRawBufferPointer.allocate(byteCount: RoleCall.maxPayload, alignment: 8)
  private let method = UnsafeMutableRawBufferPointer.allocate(
    byteCount: HostFunctions.maxName + 1, alignment: 1)
  private let named = UnsafeMutableRawBufferPointer.allocate(
    byteCount: HostFunctions.maxName + 1, alignment: 1)
  /// The channel's caller (set once per channel, kept as a C string of its own).
  private var label: (String, UnsafeMutablePointer<CChar>)?

  /// `bytes` (no NUL inside, at most maxName) as a C string in the method buffer.
  func text(_ bytes: UnsafeRawBufferPointer) -> UnsafePointer<CChar>? {
    copy(bytes, into: method)
  }

  /// The caller the channel is labelled with, else the one the host's frame names.
  func caller(_ label: String?, _ named: UnsafeRawBufferPointer) -> UnsafePointer<CChar>? {
    guard let label else { return copy(named, into: self.named) }
    if let kept = self.label, kept.0 == label { return UnsafePointer(kept.1) }
    guard let c = strdup(label) else { return nil }
    if let old = self.label { free(old.1) }
    self.label = (label, c)
    return UnsafePointer(c)
  }

  private func copy(_ bytes: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer)
    -> UnsafePointer<CChar>?
  {
    guard bytes.count < buffer.count, !bytes.contains(0), let base = buffer.baseAddress else { return nil }
    if let src = bytes.baseAddress { base.copyMemory(from: src, byteCount: bytes.count) }
    buffer[bytes.count] = 0
    return UnsafePointer(base.assumingMemoryBound(to: CChar.self))
  }

  deinit {
    response.deallocate()
    method.deallocate()
    named.deallocate()
    if let label { free(label.1) }
  }
}
