import CForsetti
import ForsettiBridge
import ForsettiCore
import Foundation
import Glibc
import Synchronization

/// The host's handle on one worker: the process, its socket, and the threads that serve the
/// module's host calls and capture its output. Every request is attributed to `moduleID` by the
/// connection it arrived on; whatever the module writes on the socket is validated as untrusted.
final class WorkerProcess: Sendable {
  let moduleID: String
  let pid: pid_t
  private let socket: WireSocket
  private let calls: CallRing
  private let backend: InProcessBackend
  /// Lifecycle frames (confined, loaded, startResult, stopped) for the main thread.
  let lifecycle = Mailbox()
  private let closedFlag = Atomic<Bool>(false)
  private let lastLines = Mutex<[String]>([])
  private let onExit: @Sendable (String, Int32) -> Void
  private let reaped = Mutex<Int32?>(nil)

  static let keptLines = 10

  enum SpawnError: Error, CustomStringConvertible {
    case socket(Int32), ring(Int32), pipe(Int32), spawn(Int32)
    var description: String {
      switch self {
      case .socket(let e): "socketpair: \(String(cString: strerror(e)))"
      case .ring(let e): "call ring (memfd, mmap): \(String(cString: strerror(e)))"
      case .pipe(let e): "pipe: \(String(cString: strerror(e)))"
      case .spawn(let e): "posix_spawn: \(String(cString: strerror(e)))"
      }
    }
  }

  /// Spawns `executable` for the module of `configuration` (posix_spawn, never fork: the host
  /// may be large and threaded).
  convenience init(
    executable: String, configuration: WorkerConfiguration, environment: HostEnvironment,
    onExit: @escaping @Sendable (String, Int32) -> Void
  ) throws(SpawnError) {
    let started = try StartedWorker.spawn(
      executable: executable, arguments: ["--config", JSONWriter.string(configuration.json)])
    self.init(started, configuration: configuration, environment: environment, onExit: onExit)
  }

  /// Serves the module of `configuration` in a worker already started: a spare started with
  /// `--await-config` is told its configuration first.
  init(
    _ started: StartedWorker, configuration: WorkerConfiguration, environment: HostEnvironment,
    onExit: @escaping @Sendable (String, Int32) -> Void
  ) {
    moduleID = configuration.moduleID
    pid = started.pid
    socket = started.socket
    calls = started.calls
    backend = InProcessBackend(environment: environment)
    backend.moduleStarting(moduleID: configuration.moduleID)
    self.onExit = onExit
    if started.awaitsConfiguration {
      socket.send(WireFrame(.configure, [.string(JSONWriter.string(configuration.json))]))
    }
    let outFD = started.outputFD
    Thread { [self] in self.readLoop() }.start()
    Thread { [self] in self.callLoop() }.start()
    Thread { [self] in self.captureOutput(outFD) }.start()
  }

  deinit { close(socket.fd) }

  var isClosed: Bool { closedFlag.load(ordering: .acquiring) }

  /// The module's most recent log and output lines, for crash reports.
  var recentLines: [String] { lastLines.withLock { $0 } }

  private func remember(_ line: String) {
    lastLines.withLock {
      $0.append(line)
      if $0.count > Self.keptLines { $0.removeFirst($0.count - Self.keptLines) }
    }
  }

  func send(_ f: WireFrame) { socket.send(f) }

  /// Takes the module off the bus before it is told to stop.
  func prepareStop() { backend.moduleStopping(moduleID: moduleID) }

  /// Kills the worker (SIGKILL) and returns its wait status; safe to call more than once.
  @discardableResult
  func kill() -> Int32 {
    Glibc.kill(pid, SIGKILL)
    return reap()
  }

  /// Waits for the worker to exit and returns its wait status.
  @discardableResult
  func reap() -> Int32 {
    if let s = reaped.withLock({ $0 }) { return s }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    reaped.withLock { $0 = status }
    return status
  }

  /// "killed by SIGSEGV (Segmentation fault)" or "exited with status 3".
  static func describe(status: Int32) -> String {
    let sig = status & 0x7F
    if sig != 0 {
      let names: [Int32: String] = [
        SIGSEGV: "SIGSEGV", SIGABRT: "SIGABRT", SIGKILL: "SIGKILL", SIGBUS: "SIGBUS", SIGFPE: "SIGFPE",
        SIGILL: "SIGILL", SIGXCPU: "SIGXCPU", SIGTERM: "SIGTERM", SIGSYS: "SIGSYS", SIGTRAP: "SIGTRAP",
      ]
      let name = names[sig] ?? "signal \(sig)"
      return "killed by \(name) (\(String(cString: strsignal(sig))))"
    }
    return "exited with status \((status >> 8) & 0xFF)"
  }

  static func signal(of status: Int32) -> Int32? {
    let sig = status & 0x7F
    return sig == 0 ? nil : sig
  }

  private func readLoop() {
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Wire.maxFrame + 1, alignment: 8)
    defer { buffer.deallocate() }
    loop: while true {
      switch socket.receive(into: buffer) {
      case .closed: break loop
      case .malformed(let why):
        backend.warn(moduleID, .crashed, "the worker sent a malformed frame (\(why)); it is stopped")
        break loop
      case .frame(let f): handle(f)
      }
    }
    closedFlag.store(true, ordering: .releasing)
    calls.close()
    backend.moduleStopped(moduleID: moduleID)
    lifecycle.post(WireFrame(.stopped, id: UInt64.max))
    // Shut, not closed: other threads may still send (a stop, a delivery under way); they now
    // fail harmlessly, and the descriptor number cannot be reused for another worker's socket
    // until the last of them is done (deinit closes it).
    shutdown(socket.fd, Int32(SHUT_RDWR))
    onExit(moduleID, pid)
  }

  /// Serves the synchronous channel until the worker is gone. Each request is answered with
  /// a `response` frame carrying a status; a request that is not a call frame gets
  /// FORSETTI_ERR_INVALID_ARGUMENT.
  private func callLoop() {
    calls.serve { bytes, slot in
      let status: Int64
      var id: UInt64 = 0
      if let f = try? WireView(bytes) {
        id = f.id
        status = answer(f) ?? Int64(FORSETTI_ERR_INVALID_ARGUMENT)
      } else {
        status = Int64(FORSETTI_ERR_INVALID_ARGUMENT)
      }
      var w = WireWriter(into: slot, kind: .response, id: id)
      w.int(status)
      return w.length ?? 0
    }
  }

  private func handle(_ f: WireFrame) {
    switch f.kind {
    case .confined, .loaded, .loadFailed, .startResult, .stopped, .stateSaved:
      lifecycle.post(f)
    case .log:
      guard let text = f.string(1) else { return }
      let level = LogLevel(rawValue: Int32(truncatingIfNeeded: f.int(0) ?? 1)) ?? .info
      let line = String(text.prefix(HostFunctions.maxMessage))
      remember(line)
      backend.log(moduleID: moduleID, level: level, message: line, metadata: [:])
    case .telemetry:
      guard let name = f.string(0), !name.isEmpty, name.utf8.count <= 128 else { return }
      let attrs = f.string(1).flatMap { $0.isEmpty ? nil : try? JSONParser.parse($0) }
      guard attrs == nil || attrs?.objectValue != nil else { return }
      _ = backend.telemetry(moduleID: moduleID, name: name, attributes: attrs)
    default:
      // Calls come on the ring only; on the socket they are ignored.
      break
    }
  }

  /// The status answering a call frame; nil for a frame that is not a call.
  private func answer(_ f: WireView) -> Int64? {
    switch f.kind {
    case .publish:
      guard let type = f.string(0), type.utf8.count <= HostFunctions.maxName, let payload = f.bytes(1) else {
        return Int64(FORSETTI_ERR_INVALID_ARGUMENT)
      }
      return Int64(backend.publish(from: moduleID, type: type, payload: payload))
    case .subscribe:
      guard let type = f.string(0), !type.isEmpty, type.utf8.count <= HostFunctions.maxName else {
        return Int64(FORSETTI_ERR_INVALID_ARGUMENT)
      }
      let box = SubscriptionID()
      // Weak: a forwarder outliving the worker must not keep it (and its descriptor) alive, and
      // while it sends, the worker (so the descriptor) cannot go away under it.
      let id = backend.subscribe(
        moduleID: moduleID, type: type,
        target: .remote { [weak self] source, type, payload in
          self?.send(
            WireFrame(
              .deliverEvent,
              [
                .int(box.value.load(ordering: .acquiring)), .string(source), .string(type),
                .bytes(Array(payload)),
              ]))
        })
      box.value.store(id, ordering: .releasing)
      return id
    case .unsubscribe:
      return Int64(backend.unsubscribe(moduleID: moduleID, id: f.int(0) ?? 0))
    case .send:
      guard let target = f.string(0), let type = f.string(1), let payload = f.bytes(2),
        target.utf8.count <= HostFunctions.maxName, type.utf8.count <= HostFunctions.maxName
      else { return Int64(FORSETTI_ERR_INVALID_ARGUMENT) }
      return Int64(backend.send(from: moduleID, to: target, type: type, payload: payload))
    case .setHandler:
      let on = (f.int(0) ?? 0) != 0
      let s = backend.setHandler(
        moduleID: moduleID,
        target: on
          ? .remote { [weak self] sender, type, payload in
            self?.send(WireFrame(.deliverMessage, [.string(sender), .string(type), .bytes(Array(payload))]))
          } : nil)
      return Int64(s)
    default:
      return nil
    }
  }

  private func captureOutput(_ fd: Int32) {
    let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
    var pending = Data()
    while true {
      let chunk = handle.availableData
      if chunk.isEmpty { break }
      pending.append(chunk)
      while let nl = pending.firstIndex(of: 0x0A) {
        let line = String(decoding: pending[pending.startIndex..<nl], as: UTF8.self)
        pending.removeSubrange(pending.startIndex...nl)
        remember(line)
        backend.log(moduleID: moduleID, level: .info, message: line, metadata: ["stream": "output"])
      }
      if pending.count > 16 * 1024 { pending.removeAll() }
    }
  }
}

final class SubscriptionID: Sendable {
  let value = Atomic<Int64>(0)
}
