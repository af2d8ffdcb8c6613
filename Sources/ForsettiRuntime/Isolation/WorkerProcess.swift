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
    var output: UInt64?
  }
  /// Whether a loop thread is at the call ring (`ringReady`).
  private let serving = Atomic<Bool>(false)
  /// How long a loop thread spins for this worker's next call after answering one.
  private let serverSpin = SpinBudget(ceiling: CallRing.spinNanoseconds)
  /// Output read but not yet a whole line.
  private let pendingOutput = Mutex<[UInt8]>([])
  /// Frames read from the socket, and calls answered, before a loop thread lets another
  /// worker go first.
  static let framesPerTurn = 32
  static let callsPerTurn = 64
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
  private let lastLines = Mutex<[String]>([])
  private let onExit: @Sendable (String, Int32) -> Void
  /// The worker's own cgroup, when the host has cgroups: released once the process is reaped.
  private let cgroupHold: WorkerCgroupHold
  /// This module's counters (`/metrics`), looked up once here, never per call.
  let counters: ModuleCounters
  /// Its crash report, once it died of a signal its handler saw.
  private let crashes: CrashReporter

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

  /// Serves the module of `configuration` in a worker already started (with `--await-config`,
  /// as every worker is): tells it its configuration.
  init(
    _ started: StartedWorker, configuration: WorkerConfiguration, cgroup: WorkerCgroup?, joined: Bool = false,
    environment: HostEnvironment, crashFiles: CrashSymbolizer.Files? = nil,
    onExit: @escaping @Sendable (String, Int32) -> Void
  ) {
    let hold = WorkerCgroupHold(cgroup)
    cgroupHold = hold
    process = ChildProcess(pid: started.pid) { hold.release() }
    crashes = CrashReporter(
      moduleID: configuration.moduleID, files: crashFiles, stateDirectory: environment.stateDirectory)
    moduleID = configuration.moduleID
    counters = environment.metrics.module(configuration.moduleID)
    counters.setCgroup(cgroup?.directories ?? [])
    caller = ModuleCaller(
      moduleID: configuration.moduleID, granted: configuration.granted, serves: configuration.serves,
      calls: configuration.calls)
    socket = started.socket
    calls = started.calls
    backend = InProcessBackend(environment: environment)
    roleChannels = environment.roleChannels
    serveCaller = ServeRingCaller(
      moduleID: configuration.moduleID, roleChannels: environment.roleChannels, counters: counters)
    backend.moduleStarting(moduleID: configuration.moduleID)
    self.onExit = onExit
    loop = environment.loop
    doorbell = forsetti_eventfd()
    let configure = session.configure()
    let outFD = started.outputFD
    guard watch(output: outFD) else {
      // Nothing would read the worker: it is ended, and its end is reported as a closed socket.
      kill()
      endOfSocket()
      return
    }
    guard configure else { return }
    let frame = Self.configureFrame(configuration)
    // A spare already in its cgroup (`SpareWorker`) is told its module at once.
    guard cgroup != nil, !joined else {
      sendConfiguration(frame)
      return
    }
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

  /// Puts the socket, the doorbell and the output pipe in the loop; false if the kernel refused.
  private func watch(output outFD: Int32) -> Bool {
    _ = fcntl(outFD, F_SETFL, fcntl(outFD, F_GETFL) | O_NONBLOCK)
    guard doorbell >= 0 else {
      close(outFD)
      return false
    }
    // Output first: it is read to its end even after the socket closes (a crash's last words).
    let output = loop.add(outFD, LoopHandler { [self] t in self.outputReady(outFD, t) })
    guard let output else {
      close(outFD)
      return false
    }
    entries.withLock { $0.output = output }
    // The ring before the socket: the socket.s end (`endOfSocket`) removes the ring's entry, so it
    // must be known by then. The worker cannot call before it has its configuration.
    guard let ring = loop.add(doorbell, LoopHandler { [self] t in self.ringReady(t) }, edge: true) else {
      return false
    }
    entries.withLock { $0.ring = ring }
    let socketEntry = loop.add(socket.fd, LoopHandler { [self] t in self.socketReady(t) })
    entries.withLock { $0.socket = socketEntry }
    return socketEntry != nil
  }

  var isClosed: Bool { closedFlag.load(ordering: .acquiring) }

  /// The module's most recent log and output lines, for crash reports.
  var recentLines: [String] { lastLines.withLock { $0 } }

  func remember(_ line: String) {
    lastLines.withLock {
      $0.append(line)
      if $0.count > Self.keptLines { $0.removeFirst($0.count - Self.keptLines) }
    }
  }

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

  /// Serves the synchronous channel while the worker calls: answers what is waiting, spins for
  /// the next call for a moment while another loop thread is free (a worker calling in a loop
  /// then never waits for a wake-up), then sleeps until the worker rings. After `callsPerTurn`
  /// answers the ring goes to the back of the loop's queue, so a worker calling without pause
  /// holds one thread at most, and only while no other worker waits.
  ///
  /// The doorbell is edge-triggered and never disarmed (no system call per sleep), so two loop
  /// threads can be here at once: `serving` lets one in. One that found the ring taken leaves
  /// it; the thread that had it looks once more after letting go, so a ring that came meanwhile
  /// is never left unanswered.
  private func ringReady(_ t: WorkerLoop.Thread) -> WorkerLoop.Next {
    while !calls.isClosed {
      guard
        serving.compareExchange(expected: false, desired: true, ordering: .sequentiallyConsistent).exchanged
      else { return .again }
      let turn = serveRing(t)
      serving.store(false, ordering: .sequentiallyConsistent)
      switch turn {
      case .closed: return .done
      case .yielded:
        // Back of the queue; the bell, rung once the ring is free, brings a thread back.
        _ = forsetti_eventfd_ring(doorbell)
        return .again
      case .asleep:
        guard calls.hasPending else { return .again }
      }
    }
    return .done
  }

  private enum RingTurn { case asleep, yielded, closed }

  /// One thread's turn at the ring, `serving` held.
  private func serveRing(_ t: WorkerLoop.Thread) -> RingTurn {
    calls.serverAwake()
    var answered = 0
    while !calls.isClosed {
      // Counted once the answer is published: the worker runs on while the clock is read again.
      let start = HostMetrics.now()
      if calls.answerPending(copy: t.scratch, answerCall) {
        counters.hostCalls.record(nanoseconds: HostMetrics.now() &- start)
        answered += 1
        if answered >= Self.callsPerTurn { return .yielded }
        continue
      }
      if spinForNextCall(t) { continue }
      if calls.serverSleeps() { return .asleep }
      calls.serverAwake()
    }
    return .closed
  }

  /// Spins while the worker may call again soon (as `serverSpin` has learnt) and another loop
  /// thread is free; true when a call came.
  private func spinForNextCall(_ t: WorkerLoop.Thread) -> Bool {
    let spin = serverSpin.next
    guard spin > 0 else { return false }
    let came = calls.spinForRequest(spin) { t.othersIdle }
    serverSpin.record(answeredWhileSpinning: came)
    return came
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

  /// Why the host killed the worker as hung, if it did.
  var hung: String? { hungVerdict.withLock { $0 } }

  /// Reads what the worker wrote to its output, a line a log record, 64 KiB a turn at most.
  private func outputReady(_ fd: Int32, _ t: WorkerLoop.Thread) -> WorkerLoop.Next {
    let chunk = min(t.scratch.count, 4096)
    for _ in 0..<16 {
      let n = Glibc.read(fd, t.scratch.baseAddress, chunk)
      if n < 0 && errno == EINTR { continue }
      if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return .again }
      guard n > 0 else {
        if let output = entries.withLock({ $0.output }) { loop.remove(output) }
        Glibc.close(fd)
        return .done
      }
      let lines = pendingOutput.withLock { pending -> [String] in
        pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: t.scratch[0..<n]))
        var lines: [String] = []
        while let nl = pending.firstIndex(of: 0x0A) {
          lines.append(String(decoding: pending[..<nl], as: UTF8.self))
          pending.removeSubrange(...nl)
        }
        if pending.count > 16 * 1024 { pending.removeAll() }
        return lines
      }
      for line in lines {
        remember(line)
        backend.log(moduleID: moduleID, level: .info, message: line, metadata: ["stream": "output"])
      }
    }
    return .again
  }
}
