import CForsetti
import CForsettiSys
import ForsettiBridge
import ForsettiCore
import FoundationEssentials
import Glibc
import Synchronization

/// The host's handle on one worker: the process, its socket, and its three entries in the
/// host's `WorkerLoop` (the socket, the call ring's doorbell, the output pipe), whose threads
/// serve the module's host calls and capture its output. Every request is attributed to `moduleID` by the
/// connection it arrived on; whatever the module writes on the socket is judged by the worker's
/// `WorkerSession` first, and a frame it has no right to send ends the worker at once.
final class WorkerProcess: Sendable {
  let moduleID: String
  /// The worker process, until reaped.
  let process: ChildProcess
  var pid: pid_t { process.pid }
  private let socket: WireSocket
  let calls: CallRing
  /// The eventfd the worker rings when it calls and the host's server sleeps (its copy goes
  /// with the configuration).
  private let doorbell: Int32
  private let loop: WorkerLoop
  /// This worker's loop entries.
  private let entries = Mutex(Entries())
  private struct Entries {
    var socket: UInt64?
    var ring: UInt64?
  }
  /// Its call ring's server in the loop.
  private let ringServer = WorkerRingServer()
  /// Its standard output and error, each line logged.
  let output: WorkerOutput
  /// Frames read from the socket, and calls answered, before a loop thread lets another
  /// worker go first.
  static let framesPerTurn = 32
  /// The module as the host bound it: every service call from the worker is judged with this.
  let caller: ModuleCaller
  /// The host's calls to this worker's role handler, on its serve ring.
  private let serveCaller: ServeRingCaller
  /// Why the host killed the worker as hung (a handler stayed in one call past its deadline and
  /// the grace, `RoleChannels`), for the crash report.
  private let hungVerdict = Mutex<String?>(nil)
  /// Every worker's role channels and the providers' progress, the host's (`RoleChannels`).
  let roleChannels: RoleChannels
  /// The host services the module's frames and calls reach (`WorkerProtocol.swift`, run-time traffic).
  let backend: InProcessBackend
  /// The protocol state: which frames may come from the worker now.
  let session = WorkerSession()
  /// Lifecycle events (accepted lifecycle frames, a violation, the socket closing) for the
  /// host's main thread.
  let events = WorkerEvents()
  private let closedFlag = Atomic<Bool>(false)
  private let stopSent = Atomic<Bool>(false)
  private let onExit: @Sendable (String, Int32) -> Void
  /// The worker's own cgroup, when the host has cgroups: released once the process is reaped.
  private let cgroupHold: WorkerCgroupHold
  /// This module's counters (`/metrics`), looked up once here, never per call.
  let counters: ModuleCounters
  /// Its crash report, once it died of a signal its handler saw.
  private let crashes: CrashReporter

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

  /// The parts every worker has, however the host came to serve it.
  private init(
    moduleID: String, pid: pid_t, socket: WireSocket, calls: CallRing, doorbell: Int32, caller: ModuleCaller,
    cgroup: WorkerCgroup?, environment: HostEnvironment, crashFiles: CrashSymbolizer.Files?,
    output: (pending: [UInt8], lines: [String]) = ([], []),
    onExit: @escaping @Sendable (String, Int32) -> Void
  ) {
    let hold = WorkerCgroupHold(cgroup)
    cgroupHold = hold
    process = ChildProcess(pid: pid) { hold.release() }
    crashes = CrashReporter(moduleID: moduleID, files: crashFiles, stateDirectory: environment.stateDirectory)
    self.moduleID = moduleID
    counters = environment.metrics.module(moduleID)
    counters.setCgroup(cgroup?.directories ?? [])
    self.caller = caller
    self.socket = socket
    self.calls = calls
    backend = InProcessBackend(environment: environment)
    self.output = WorkerOutput(
      moduleID: moduleID, backend: backend, loop: environment.loop, pending: output.pending,
      lines: output.lines)
    roleChannels = environment.roleChannels
    serveCaller = ServeRingCaller(
      moduleID: moduleID, roleChannels: environment.roleChannels, counters: counters)
    backend.moduleStarting(moduleID: moduleID)
    self.onExit = onExit
    loop = environment.loop
    self.doorbell = doorbell
  }

  /// Serves the module of `configuration` in a worker already started (with `--await-config`,
  /// as every worker is): tells it its configuration.
  convenience init(
    _ started: StartedWorker, configuration: WorkerConfiguration, cgroup: WorkerCgroup?, joined: Bool = false,
    environment: HostEnvironment, crashFiles: CrashSymbolizer.Files? = nil,
    onExit: @escaping @Sendable (String, Int32) -> Void
  ) {
    self.init(
      moduleID: configuration.moduleID, pid: started.pid, socket: started.socket, calls: started.calls,
      doorbell: forsetti_eventfd(),
      caller: ModuleCaller(
        moduleID: configuration.moduleID, granted: configuration.granted, serves: configuration.serves,
        calls: configuration.calls), cgroup: cgroup, environment: environment, crashFiles: crashFiles,
      onExit: onExit)
    let configure = session.configure()
    guard watch(output: started.outputFD) else {
      // Nothing would read the worker: it is ended, and its end is reported as a closed socket.
      kill()
      endOfSocket()
      return
    }
    guard configure else { return }
    // A spare already in its cgroup (`SpareWorker`) is told its module at once.
    guard let cgroup, !joined else {
      sendConfiguration(Self.configureFrame(configuration))
      return
    }
    // cgroup v1: the worker moves itself before it does anything else (`cgroupTasks`), which
    // the kernel does without the grace period a move by the host waits for.
    if let tasks = cgroup.selfJoinTasks {
      var told = configuration
      told.cgroupTasks = tasks
      sendConfiguration(Self.configureFrame(told))
      return
    }
    let frame = Self.configureFrame(configuration)
    // Joining a cgroup waits for an RCU grace period in the kernel (milliseconds), during which
    // nothing may create a thread: the worker is joined after this worker's threads exist, on a
    // thread of its own, while the worker is still starting up, and told its module only once it
    // is in — it has run no module code before.
    _ = DetachedThread.start { [self] in
      // Under the reaping lock: a worker killed and reaped meanwhile (a deadline passed) must
      // not have its pid, perhaps another process's by now, written into its cgroup.
      let failure =
        process.whileRunning { cgroupHold.join($0) } ?? "the worker ended before it joined its cgroup"
      guard let failure else {
        sendConfiguration(frame)
        return
      }
      cgroupHold.failed(failure)
      kill()
    }
  }

  /// Serves a worker the image of the host before this one started and handed over
  /// (`WorkerHandover`), its module running: nothing is sent to it, and its next host call is
  /// answered by this image. nil when its rings cannot be mapped (its descriptors are then the
  /// caller's to close).
  convenience init?(
    adopting h: WorkerHandover, caller: ModuleCaller, cgroup: WorkerCgroup?, environment: HostEnvironment,
    crashFiles: CrashSymbolizer.Files?, onExit: @escaping @Sendable (String, Int32) -> Void
  ) {
    guard let calls = CallRing.adopt(fd: h.ringFD) else { return nil }
    self.init(
      moduleID: h.moduleID, pid: h.pid, socket: WireSocket(fd: h.socketFD), calls: calls,
      doorbell: h.doorbellFD,
      caller: caller, cgroup: cgroup, environment: environment, crashFiles: crashFiles,
      output: (h.pendingOutput, h.recentLines), onExit: onExit)
    session.adopt()
  }

  /// Serves an adopted worker from now on (`output`, its pipe's read end, now the output's):
  /// put in the loop once every other part of the host it reaches is entered again, so none of
  /// its calls finds a subscriber or a provider not yet back. Ended if the kernel refused.
  func serveAdopted(output fd: Int32?) {
    if let fd, !output.watch(fd) {
      kill()
      endOfSocket()
      return
    }
    guard watch() else {
      kill()
      endOfSocket()
      return
    }
    // A call the worker made while no image served it rang the doorbell or waits on the ring:
    // looked at once now either way.
    _ = forsetti_eventfd_ring(doorbell)
  }

  /// What this image hands the next of this worker (the loop paused): its descriptors and its
  /// output; nil when it cannot be handed over (its socket closed, its rings' memory not kept).
  var handover: (socket: Int32, ring: Int32, doorbell: Int32, output: Int32?, pending: [UInt8])? {
    guard !isClosed, session.phase == .started, calls.descriptor >= 0, doorbell >= 0 else { return nil }
    let (fd, pending) = output.handover
    return (socket.fd, calls.descriptor, doorbell, fd, pending)
  }

  /// Why the worker could not be put in its cgroup (it was then killed before it was told its
  /// module), for the load step's failure.
  var cgroupFailure: String? { cgroupHold.failure }

  deinit {
    close(socket.fd)
    if doorbell >= 0 { close(doorbell) }
  }

  /// The configuration, with the doorbell the worker's call ring rings.
  private func sendConfiguration(_ frame: WireFrame) {
    socket.send(frame, attaching: doorbell)
  }

  /// Puts the output pipe, the doorbell and the socket in the loop; false if the kernel refused.
  private func watch(output outFD: Int32) -> Bool {
    guard doorbell >= 0 else {
      close(outFD)
      return false
    }
    // Output first: it is read to its end even after the socket closes (a crash's last words).
    return output.watch(outFD) && watch()
  }

  /// Puts the doorbell and the socket in the loop; false if the kernel refused.
  private func watch() -> Bool {
    guard doorbell >= 0 else { return false }
    // The ring before the socket: the socket.s end (`endOfSocket`) removes the ring's entry, so it
    // must be known by then. The worker cannot call before it has its configuration.
    let ringEntry = LoopHandler { [self] t in
      ringServer.ready(t, calls: calls, doorbell: doorbell, counters: counters, answerCall)
    }
    guard let ring = loop.add(doorbell, ringEntry, edge: true) else {
      return false
    }
    entries.withLock { $0.ring = ring }
    let socketEntry = loop.add(socket.fd, LoopHandler { [self] t in self.socketReady(t) })
    entries.withLock { $0.socket = socketEntry }
    return socketEntry != nil
  }

  var isClosed: Bool { closedFlag.load(ordering: .acquiring) }

  /// The module's most recent log and output lines, for crash reports.
  var recentLines: [String] { output.recentLines }

  func remember(_ line: String) { output.remember(line) }

  func send(_ f: WireFrame) { socket.send(f) }

  @discardableResult
  func send(_ f: WireFrame, attaching fd: Int32) -> Bool { socket.send(f, attaching: fd) }

  /// Closes the provider's ends of this worker's channels: its module serves its role no more.
  func closeServingChannels() {
    roleChannels.close(owner: ObjectIdentifier(self), asConsumer: false)
  }

  /// Closes every role channel this worker is an end of: the other side's calls on it end
  /// (a consumer's go back through the host, which answers for itself).
  func closeChannels() {
    roleChannels.close(owner: ObjectIdentifier(self), asConsumer: true)
  }

  /// Sends `start` (with the state to restore); false if the worker is not loaded.
  func start(state: [UInt8]) -> Bool {
    guard session.start() else { return false }
    send(WireFrame(.start, [.bytes(state)]))
    return true
  }

  /// Sends `confirmStart` under a fresh nonce, once `startResult(OK)` came; false otherwise.
  func confirmStart() -> Bool {
    guard let nonce = session.confirmStart() else { return false }
    send(WireFrame(.confirmStart, id: nonce))
    return true
  }

  /// Sends `stop`; false if the module is not running.
  func stop() -> Bool {
    guard session.stop() else { return false }
    send(WireFrame(.stop))
    return true
  }

  /// Asks the module to stop without waiting for it (`stopModule` then waits, and its deadline
  /// starts there): the host stops a whole level of modules at once.
  func requestStop() {
    prepareStop()
    guard session.violation == nil, !isClosed, stop() else { return }
    stopSent.store(true, ordering: .releasing)
  }

  /// Whether `requestStop` sent the stop.
  var stopRequested: Bool { stopSent.load(ordering: .acquiring) }

  /// Takes the module off the bus (and its role channels) before it is told to stop.
  func prepareStop() {
    backend.moduleStopping(moduleID: moduleID)
    closeChannels()
  }

  /// Sends SIGKILL unless the process was already reaped (its pid may be another's by then).
  func kill() { process.kill() }

  /// The worker's RLIMIT_FSIZE as it was (soft, hard), after `set` when given
  /// (`SandboxQuotaMeter`); nil once the process was reaped (its pid may be another's by then)
  /// or when the kernel refused.
  func fileSizeLimit(set change: FileSizeChange? = nil) -> (soft: UInt64, hard: UInt64)? {
    process.whileRunning { pid -> (soft: UInt64, hard: UInt64)? in
      var soft: UInt64 = 0
      var hard: UInt64 = 0
      let rc: Int32
      switch change {
      case nil: rc = forsetti_file_size_limit(pid, 0, 0, &soft, &hard)
      case .soft(let v): rc = forsetti_file_size_limit(pid, 1, v, &soft, &hard)
      case .both(let v): rc = forsetti_file_size_limit(pid, 2, v, &soft, &hard)
      }
      return rc == 0 ? (soft, hard) : nil
    } ?? nil
  }

  /// The wait status if the process has exited (reaping it), without waiting.
  func exitStatus() -> Int32? { process.exitStatus() }

  /// The report of the crash this worker died of, made once from its crash record (after it
  /// died: the record is its last word) when `status` says a signal ended it; nil otherwise.
  func crashReport(status: Int32?) -> CrashReport? {
    crashes.report(status: status, record: calls.crashRecord)
  }

  /// The crash report made, if any.
  var madeCrashReport: CrashReport? { crashes.report }

  /// What the worker's cgroup said of its end, once reaped (an OOM kill); nil otherwise.
  var cgroupFinding: String? { cgroupHold.finding }

  /// Its cgroup's directories and controllers (empty: the host has no cgroups).
  var cgroupPlaces: [WorkerCgroup.Place] { cgroupHold.cgroup?.places ?? [] }

  /// The wait status once the process exits, waiting at most `seconds`.
  func exitStatus(within seconds: Double) -> Int32? { process.exitStatus(within: seconds) }

  /// Ends the worker and returns its wait status (`ChildProcess.end`).
  @discardableResult
  func end(grace: Double = 0) -> Int32? { process.end(grace: grace) }

  /// Reads what the worker sent, a bounded number of frames a turn.
  private func socketReady(_ t: WorkerLoop.Thread) -> WorkerLoop.Next {
    let buffer = t.scratch
    var frames = 0
    while frames < Self.framesPerTurn {
      let n = recv(socket.fd, buffer.baseAddress, buffer.count, Int32(MSG_TRUNC) | Int32(MSG_DONTWAIT))
      if n < 0 && errno == EINTR { continue }
      if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return .again }
      frames += 1
      // Closed (or died); an empty message reads the same and ends the worker the same way.
      guard n > 0 else {
        endOfSocket()
        return .done
      }
      // The raw kind, for the report, even of a frame that does not decode.
      let rawKind: UInt32? =
        n >= 4 ? UInt32(littleEndian: buffer.loadUnaligned(as: UInt32.self)) : nil
      let verdict: WorkerSession.Verdict
      let frame: WireFrame?
      if n > buffer.count {
        frame = nil
        verdict = .violation(session.malformed(kind: rawKind, "\(n) bytes, more than \(Wire.maxFrame)"))
      } else {
        do throws(Wire.DecodeError) {
          let f = try Wire.decode(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
          frame = f
          verdict = session.receive(f)
        } catch {
          frame = nil
          verdict = .violation(session.malformed(kind: rawKind, Self.explain(error)))
        }
      }
      switch verdict {
      case .lifecycle: if let frame { events.post(.frame(frame)) }
      case .service:
        if let frame {
          let start = HostMetrics.now()
          serve(frame)
          counters.hostCalls.record(nanoseconds: HostMetrics.now() &- start)
        }
      case .stale: continue
      case .violation(let v):
        // Killed at once: whatever the worker does next is not waited for or believed.
        kill()
        events.post(.violated(v))
        endOfSocket()
        return .done
      }
    }
    return .again
  }

  /// The socket closed (or the worker broke the protocol): nothing more is read or served.
  private func endOfSocket() {
    guard !closedFlag.exchange(true, ordering: .acquiringAndReleasing) else { return }
    let (socketEntry, ring) = entries.withLock { ($0.socket, $0.ring) }
    if let socketEntry { loop.remove(socketEntry) }
    if let ring { loop.remove(ring) }
    calls.close()
    closeChannels()
    backend.moduleStopped(moduleID: moduleID)
    events.post(.closed)
    // Shut, not closed: other threads may still send (a stop, a delivery under way); they now
    // fail harmlessly, and the descriptor number cannot be reused for another worker's socket
    // until the last of them is done (deinit closes it).
    shutdown(socket.fd, Int32(SHUT_RDWR))
    onExit(moduleID, pid)
  }

  private static func explain(_ e: Wire.DecodeError) -> String {
    switch e {
    case .short: "truncated"
    case .unknownKind(let k): "unknown kind \(k)"
    case .badTag(let t): "bad value tag \(t)"
    case .tooManyValues: "more than \(WireView.maxValues) values"
    }
  }

  /// Answers one request of the synchronous channel with a `response` frame carrying a status;
  /// a request that is not a call frame gets FORSETTI_ERR_INVALID_ARGUMENT.
  private func answerCall(_ bytes: UnsafeRawBufferPointer, _ slot: UnsafeMutableRawBufferPointer) -> Int {
    let status: Int64
    var id: UInt64 = 0
    if let f = try? WireView(bytes) {
      id = f.id
      if f.kind == .service {
        var w = WireWriter(into: slot, kind: .response, id: id)
        answerService(f).write(&w)
        return w.length ?? 0
      }
      status = answer(f) ?? Int64(FORSETTI_ERR_INVALID_ARGUMENT)
    } else {
      status = Int64(FORSETTI_ERR_INVALID_ARGUMENT)
    }
    var w = WireWriter(into: slot, kind: .response, id: id)
    w.int(status)
    return w.length ?? 0
  }

  /// Calls the role handler of this worker's module through its serve ring, waiting until
  /// `deadline` at most (`ServeRingCaller`).
  func callRole(_ call: RoleCall, deadline: UInt64) -> ServiceReply {
    guard let ring = calls.serves, !isClosed else { return .status(FORSETTI_ERR_UNAVAILABLE) }
    return serveCaller.call(call, deadline: deadline, on: ring) { isClosed }
  }

  /// Kills the worker as hung, with `verdict` (`RoleChannels` judged it): supervision restarts
  /// it like a crash.
  func killHung(_ verdict: String) {
    guard !isClosed else { return }
    hungVerdict.withLock { $0 = verdict }
    backend.environment.hostLog(.error, about: moduleID, "\(verdict); killing its worker (pid \(pid))")
    kill()
  }

  /// The provider's end of a new channel from `consumer` (in the worker `owner`): sent to this
  /// worker, labelled with the consumer the host bound. nil when this worker is gone or the
  /// channel cannot be made.
  func acceptChannel(from consumer: String, owner: ObjectIdentifier, progress: WorkerProgress?)
    -> (ring: ChannelRing, fd: Int32)?
  {
    guard !isClosed,
      let (ring, fd) = roleChannels.open(
        consumer: consumer, consumerOwner: owner, consumerProgress: progress, provider: moduleID)
    else { return nil }
    counters.countRoleCalls(on: ring)
    guard send(WireFrame(.roleChannel, [.int(0), .string(consumer)]), attaching: fd) else {
      ring.close()
      close(fd)
      return nil
    }
    if isClosed { ring.close() }
    return (ring, fd)
  }
  /// Why the host killed the worker as hung, if it did.
  var hung: String? { hungVerdict.withLock { $0 } }
}

/// A subscription's ID, known to its forwarder once the bus gave it.
final class SubscriptionID: Sendable {
  let value = Atomic<Int64>(0)
}
