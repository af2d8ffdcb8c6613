import CForsetti
import ForsettiBridge
import ForsettiCore
import Glibc
import Synchronization

// The host's half of the worker protocol: what the host says to one forsetti-worker, and what
// it makes of every frame the worker sends back. The worker's half is `WorkerMain`
// (Sources/ForsettiBridge/Worker/WorkerMain.swift, with `WorkerLink` for the run-time
// traffic); the sections of this file mirror its sections, in the same order. `WorkerProcess`
// owns the process, its channels and the threads that read them; `WorkerSession`
// (WorkerSession.swift) judges every frame before anything acts on it.
//
// The whole conversation on the socket (fd 3, one SOCK_SEQPACKET message per frame), in the
// only order it may go; "phase" is the session's phase once the frame has passed.
//
//   host → worker                   worker → host                      phase
//   ─────────────────────────────   ────────────────────────────────   ──────────────
//   spawn `forsetti-worker --await-config` (a spare is spawned before    spawned
//     its module is known: it confines and loads nothing yet)
//   configure(json): protocolVersion,                                  configuring
//     module, library, confinement policy, limits, host pid
//                                   loadFailed(reason, detail)         finished
//                                     another protocol version (checked
//                                     first), or confinement failed
//                                   confined(json): protocolVersion,   loading
//                                     what confinement achieved
//     the host checks the version: another one ends the start as `loadFailed`, worker killed
//                                   loaded(json): descriptor, UI       loaded
//                                   | loadFailed(reason, detail)       finished
//                                     dlopen, entry point, ABI, UI tables
//                                   loadFailed(reason, detail)         finished
//                                     after `loaded`: no call ring, no thread
//     the host judges the descriptor (step 8) and releases `start` in module-ID order
//   start(state bytes)                                                 starting
//                                   startResult(FORSETTI_OK)           returned
//                                   | startResult(other status)        finished
//   confirmStart(id: a fresh random nonce)                             confirming(id)
//                                   startConfirmed(id)                 started
//     only the worker's main thread answers, once `start` returned: a `startResult` a
//     module's thread forged while `start` runs leaves the start deadline armed (the real one
//     that follows is a violation), so forging buys no time
//   saveState(id), any number of times while started                   saving(id)
//                                   stateSaved(id, bytes)              started
//     not answered in time: the host goes on without the state, and drops the late answer
//   stop                                                               stopping
//                                   stopped                            finished
//     the worker then exits 0 at once (`_exit`: no destructors, no atexit handlers)
//
// Run-time traffic, beside the lifecycle (section "Run-time traffic"):
//   - worker → host on the socket, from `confined` to the end (a module's constructors run at
//     load): `log(level, line)`, `telemetry(name, attributes json)`.
//   - host → worker on the socket, once the module subscribed or set a handler:
//     `deliverEvent(subscription, source, type, payload)`, `deliverMessage(sender, type, payload)`.
//   - the module's host calls `publish`, `subscribe`, `unsubscribe`, `send`, `setHandler`, each
//     answered by `response(id, status)`, and `service(operation, room, number, arguments)`
//     (the ABI 1.1 services), answered by `response(id, status, length, bytes)`: on the call
//     ring (fd 4, shared memory), never on the socket.
//   - a module that serves a role (`service(roleServe)`): the host's calls of other modules
//     come as `serveCall(room, caller, method, request)` on the serve ring (the second ring of
//     fd 4's mapping), answered by `response(id, status, length, bytes)`.
//   - role channels: a consumer asks for one with `service(roleConnect)`; when the role's
//     provider is in a worker the host sends the provider's worker `roleChannel(0, consumer)`
//     and the consumer's `roleChannel(1, role)` on the socket, each with the descriptor of one
//     new ring attached, then answers; every call of the role goes on it as a `serveCall`, the
//     host closes it when either module stops. A call on it not answered in time is reported
//     (`service(roleStalled)`); the host then sends its own `probe` on the provider's serve
//     ring, and kills the provider as hung if that is not answered in time either.
//
// Anything else from the worker — a kind the worker never sends (every host → worker kind, an
// unknown kind), a kind not valid in the current phase (a second `startResult`, `stopped`
// before `stop`, `stateSaved` nobody asked for, `loaded` before `confined`), a frame missing
// the value its kind carries, or bytes that are not a frame — is a protocol violation: the
// worker is killed and nothing the frame claimed is believed.
//
// How a worker ends. After its last word (`loadFailed`, a failed `startResult`, `stopped`) or a
// closed socket it gets `exitGrace` to exit by itself, then is killed. Loading, start and stop
// each have a deadline (the start timeout, the start timeout again from `start` until
// `startConfirmed`, the stop timeout): past it the worker is killed. Save state has one too, past which only the state is
// given up. The worker, for its part, exits as soon as the host's end of the socket closes,
// and dies with the host (parent-death signal).

extension WorkerProcess {
  /// Seconds a worker that said its last word (`loadFailed`, a failed `startResult`, `stopped`)
  /// or closed its socket gets to exit by itself before it is killed: it may have closed the
  /// socket and gone on running. Used after those frames and a closed socket, in start
  /// (`startStep`) and stop (`stopModule`).
  static let exitGrace = 0.5
}

extension WorkerProcess {
  /// Ends a worker that is closing or closed and says how it ended. One that broke the protocol
  /// is killed at once; any other is given `exitGrace` to exit by itself first.
  func finish() -> WorkerEnding {
    let violation = session.violation
    let status = violation == nil ? end(grace: Self.exitGrace) : end()
    // Read while the shared record is still mapped, before the channels go.
    if violation == nil { _ = crashReport(status: status) }
    return WorkerEnding.classify(
      violation: violation, hung: hung, status: status, cgroupVerdict: cgroupFinding)
  }
}

// MARK: - Configure (↔ WorkerMain: await the configuration)

extension WorkerProcess {
  /// The first frame a worker reads: the module it is for, and the protocol the host speaks
  /// (`configuration.protocolVersion`, this build's unless a test says otherwise).
  static func configureFrame(_ configuration: WorkerConfiguration) -> WireFrame {
    WireFrame(.configure, [.string(JSONWriter.string(configuration.json))])
  }
}

// MARK: - Confined, loaded, start (↔ WorkerMain: confine, load, start)

extension WorkerProcess {
  /// What `e`, the next event from this worker, means for its start.
  func startStep(after e: WorkerEvent, _ p: WorkerStartProgress) -> WorkerStartStep {
    switch e {
    case .frame(let f):
      return startStep(after: f, p)
    case .violated(let v):
      end()
      return .failed(p.step, .protocolViolation, v.description, restart: v.description)
    case .closed:
      if let why = cgroupFailure {
        end()
        return .failed(.load, .loadFailed, why, restart: nil)
      }
      if p.fromSpare && !p.confined {
        end()
        return .spareLost
      }
      let ending = finish()
      if case .violated(let v) = ending {
        return .failed(p.step, .protocolViolation, v.description, restart: v.description)
      }
      let lines = recentLines
      let tail = lines.isEmpty ? "" : "; last lines: " + lines.suffix(3).joined(separator: " | ")
      let where_ = madeCrashReport.map { ": \($0.summary)" } ?? ""
      let failure = "\(ending.exit) \(p.moment)\(where_)"
      return .failed(p.step, .crashed, "worker \(failure)\(tail)", restart: failure)
    }
  }

  /// What a lifecycle frame (one the session let through) means for the start.
  func startStep(after f: WireFrame, _ p: WorkerStartProgress) -> WorkerStartStep {
    switch f.kind {
    case .confined: return confined(f)
    case .loadFailed:
      // The worker's last word; it exits, and is killed if it does not.
      end(grace: Self.exitGrace)
      let reason = f.string(0).flatMap(ReasonCode.init(rawValue:)) ?? .loadFailed
      return .failed(.load, reason, f.string(1) ?? "the worker could not load the module", restart: nil)
    case .loaded: return loaded(f)
    case .startResult: return startResult(f)
    case .startConfirmed: return .started
    // The session lets no other lifecycle frame through before the module runs.
    default: return .nothing
    }
  }

  /// The start did not get past `p` within `seconds`: the worker is killed.
  func startTimedOut(_ p: WorkerStartProgress, after seconds: Double) -> WorkerStartStep {
    // A `startResult` came but the main thread never confirmed it: a thread of the module
    // wrote it while `start` ran on.
    let unconfirmed =
      switch session.phase {
      case .returned, .confirming:
        " (a startResult came, but the worker's main thread never returned from start)"
      default: ""
      }
    end()
    return .failed(
      p.step, .startTimedOut,
      "\(p.loaded ? "start" : "loading") did not finish within \(seconds) s\(unconfirmed); the worker was killed",
      restart: nil)
  }

  /// `confined`: the worker's protocol version, then what confinement achieved.
  private func confined(_ f: WireFrame) -> WorkerStartStep {
    let json = f.string(0) ?? ""
    let version = ProtocolVersion.of(json: json) ?? 0
    guard version == ProtocolVersion.current else {
      // Killed before it says more: a worker of another build may mean anything by its frames.
      end()
      return .failed(
        .load, .loadFailed, ProtocolVersion.mismatch(worker: version, host: ProtocolVersion.current),
        restart: nil)
    }
    return .confined(ConfinementReport(json: json).map { "confined: \($0)" } ?? "confinement unknown")
  }

  /// `loaded`: the module's descriptor and UI contributions, untrusted.
  private func loaded(_ f: WireFrame) -> WorkerStartStep {
    guard let text = f.string(0), let (descriptor, ui) = WorkerCodec.decodeLoaded(text) else {
      end()
      return .failed(
        .load, .loadFailed, "the worker reported its module in a form the host cannot read", restart: nil)
    }
    return .loaded(descriptor, ui)
  }

  /// `startResult`: the status the module's `start` returned.
  private func startResult(_ f: WireFrame) -> WorkerStartStep {
    let status = f.int(0) ?? Int64(FORSETTI_ERR_START_FAILED)
    guard status == Int64(FORSETTI_OK) else {
      end(grace: Self.exitGrace)
      return .failed(
        .start, .startFailed, "start returned \(StatusName.of(Int32(truncatingIfNeeded: status)))",
        restart: nil)
    }
    // Not started yet: only the main thread's answer says `start` returned (a module's thread
    // may have written this frame). False only if the worker broke off: its next event says how.
    _ = confirmStart()
    return .nothing
  }
}

// MARK: - Save state (↔ WorkerMain's `saveState` command)

extension WorkerProcess {
  /// The module's saved state; nil when it keeps none, cannot answer within `timeout` (a late
  /// answer is dropped, not a violation), or the worker broke off.
  func saveModuleState(timeout: Double) -> [UInt8]? {
    guard let id = session.saveState() else { return nil }
    send(WireFrame(.saveState, id: id))
    let deadline = ContinuousClock.now + .wait(timeout)
    while let e = events.next(until: deadline) {
      switch e {
      case .frame(let f) where f.kind == .stateSaved:
        return f.bytes(0).flatMap { $0.isEmpty ? nil : $0 }
      case .frame: continue
      // The stop that follows finds the worker gone and says why (`stopModule`).
      case .violated, .closed: return nil
      }
    }
    // Too slow: the caller goes on without state; the session drops the late answer.
    session.abandonSave(id)
    return nil
  }
}

// MARK: - Stop (↔ WorkerMain's `stop` command)

/// How asking a worker's module to stop ended.
enum WorkerStopOutcome: Sendable, Equatable {
  /// `stopped` came, or the worker exited 0 by itself after its socket closed.
  case stopped
  /// No `stopped` within this many seconds: the worker was killed.
  case killedAfterTimeout(Double)
  /// The worker exited otherwise: "worker killed by SIGABRT (Aborted) during stop; last lines: …".
  case crashed(String)
  /// The worker broke the protocol before or during the stop (the violation's phase says which:
  /// `.stopping` is during): it was killed.
  case violated(ProtocolViolation)
}

extension WorkerProcess {
  /// Stops the module: `prepareStop`, `stop`, then `stopped` within `timeout`, or kills it.
  /// Never blocks past its deadline (plus `exitGrace` and `reapTimeout` for a worker that will
  /// not die). Does not log or record: the caller does.
  func stopModule(timeout: Double) -> WorkerStopOutcome {
    prepareStop()
    // Asked already (`requestStop`, a level stopping at once): what came since is judged in the
    // order it came, as if this had waited from the moment it asked — a `stopped` first is the
    // answer, whatever the worker sends after it.
    let requested = stopRequested
    if !requested, let v = session.violation {
      end()
      return .violated(v)
    }
    let deadline = ContinuousClock.now + .wait(timeout)
    let asked = requested || (!isClosed && stop())
    while asked {
      guard let event = events.next(until: deadline) else {
        end()
        return .killedAfterTimeout(timeout)
      }
      switch event {
      case .frame(let f) where f.kind == .stopped:
        // Its last word: the worker exits now, and is killed if it does not.
        end(grace: Self.exitGrace)
        return .stopped
      case .frame: continue
      case .violated(let v):
        end()
        return .violated(v)
      case .closed: break
      }
      break
    }
    // A violation between the check above and the `stop` (which the session then refused) is
    // the first thing `finish` looks at.
    // The socket closed without a `stopped` frame (or before the stop was sent).
    let ending = finish()
    switch ending {
    case .exited: return .stopped
    case .violated(let v): return .violated(v)
    case .hung, .crashed:
      let tail = recentLines.suffix(3).joined(separator: " | ")
      return .crashed("\(ending) during stop\(tail.isEmpty ? "" : "; last lines: \(tail)")")
    }
  }
}

// MARK: - Run-time traffic (↔ WorkerLink: host calls out, deliveries in)

extension WorkerProcess {
  /// Serves a log or telemetry frame (the session let it through).
  func serve(_ f: WireFrame) {
    switch f.kind {
    case .log:
      guard let text = f.string(1) else { return }
      let level = LogLevel(rawValue: Int32(truncatingIfNeeded: f.int(0) ?? 1)) ?? .info
      let line = String(text.prefix(HostFunctions.maxMessage))
      remember(line)
      backend.log(moduleID: moduleID, level: level, message: line, metadata: [:])
    case .telemetry:
      guard let name = f.string(0), !name.isEmpty, name.utf8.count <= HostFunctions.maxTelemetryName else {
        return
      }
      let attrs = f.string(1).flatMap { $0.isEmpty ? nil : try? JSONParser.parse($0) }
      guard attrs == nil || attrs?.objectValue != nil else { return }
      _ = backend.telemetry(moduleID: moduleID, name: name, attributes: attrs)
    default:
      break
    }
  }

  /// The status answering a call frame; nil for a frame that is not a call.
  func answer(_ f: WireView) -> Int64? {
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
      return subscribe(type)
    case .unsubscribe:
      return Int64(backend.unsubscribe(moduleID: moduleID, id: f.int(0) ?? 0))
    case .send:
      guard let target = f.string(0), let type = f.string(1), let payload = f.bytes(2),
        target.utf8.count <= HostFunctions.maxName, type.utf8.count <= HostFunctions.maxName
      else { return Int64(FORSETTI_ERR_INVALID_ARGUMENT) }
      return Int64(backend.send(from: moduleID, to: target, type: type, payload: payload))
    case .setHandler: return Int64(takeMessages((f.int(0) ?? 0) != 0))
    default:
      return nil
    }
  }

  /// Subscribes the module to `type`, its events sent to the worker: the subscription's ID (or
  /// a negative status). With `restoring`, enters the one of that ID an image of the host
  /// before this one gave (nil: it could not be).
  func subscribe(_ type: String, restoring: Int64? = nil) -> Int64 {
    let box = SubscriptionID()
    // Weak: a forwarder outliving the worker must not keep it (and its descriptor) alive, and
    // while it sends, the worker (so the descriptor) cannot go away under it.
    let target = DeliveryTarget<forsetti_event_handler>.remote { [weak self] source, type, payload in
      self?.send(
        WireFrame(
          .deliverEvent,
          [
            .int(box.value.load(ordering: .acquiring)), .string(source), .string(type),
            .bytes(Array(payload)),
          ]))
    }
    let id: Int64
    if let restoring {
      guard
        backend.environment.events.restore(moduleID: moduleID, id: restoring, eventType: type, target: target)
      else { return Int64(FORSETTI_ERR_INVALID_ARGUMENT) }
      id = restoring
    } else {
      id = backend.subscribe(moduleID: moduleID, type: type, target: target)
    }
    box.value.store(id, ordering: .releasing)
    return id
  }

  /// Sends the module's messages to the worker (or no longer).
  func takeMessages(_ on: Bool) -> Int32 {
    backend.setHandler(
      moduleID: moduleID,
      target: on
        ? .remote { [weak self] sender, type, payload in
          self?.send(WireFrame(.deliverMessage, [.string(sender), .string(type), .bytes(Array(payload))]))
        } : nil)
  }
}

extension WorkerProcess {
  /// The answer to a `service` frame: the host's services, judged with the host's own
  /// `caller` (never anything the worker says about itself). `roleServe` enters this worker's
  /// module as its role's provider, reached through its serve ring and its consumers' channels.
  func answerService(_ f: WireView) -> ServiceReply {
    guard let r = ServiceRequest(f) else { return .status(FORSETTI_ERR_INVALID_ARGUMENT) }
    let roles = backend.environment.services.roles
    switch r.operation {
    case .roleServe: break
    case .roleCall:
      // A consumer in a worker calls a provider in a worker on a channel of its own, never
      // through the host: a call relayed there would hold one of the host's loop threads up to
      // its deadline, and enough modules doing so would hold them all (every other worker's host
      // calls waiting), or keep the serve ring from the application. Only a provider in the
      // host's process is called through the host; UNAVAILABLE, as for a provider just gone, has
      // a consumer that raced a provider's move into a worker ask again (for its channel).
      if case .channel = roles.route(r.number, for: caller) { return .status(FORSETTI_ERR_UNAVAILABLE) }
      return backend.service(r, from: caller)
    case .roleConnect: return .status(connect(r.number, roles))
    case .roleStalled: return .status(roles.stalled(r.number, from: caller))
    case .roleWaiting:
      guard let lane = r.argument(0)?.first, let provider = roles.provider(r.number, for: caller) else {
        return .status(FORSETTI_OK)
      }
      return .status(
        roleChannels.judgeQueued(
          consumer: moduleID, owner: ObjectIdentifier(self), provider: provider, lane: Int(lane)))
    default: return backend.service(r, from: caller)
    }
    guard r.number != 0 else { return .status(backend.serveRole(caller, remote: nil)) }
    guard r.number >= 1, r.number <= Int64(FORSETTI_ROLE_MAX_CONCURRENCY) else {
      return .status(FORSETTI_ERR_INVALID_ARGUMENT)
    }
    return .status(serve(concurrency: Int(r.number)))
  }

  /// Enters this worker's module as its role's provider, `concurrency` calls at once.
  func serve(concurrency: Int) -> Int32 {
    guard let serveRing = calls.serves, let progress = calls.progress else {
      return FORSETTI_ERR_INVALID_ARGUMENT
    }
    // Weak: the registry must not keep a dead worker (and its rings) alive.
    let remote = RoleRegistry.RemoteProvider(
      call: { [weak self] call, deadline in
        guard let self else { return .status(FORSETTI_ERR_UNAVAILABLE) }
        return self.callRole(call, deadline: deadline)
      },
      connect: { [weak self] consumer, owner, progress in
        self?.acceptChannel(from: consumer, owner: owner, progress: progress)
      },
      disconnect: { [weak self] in self?.closeServingChannels() },
      suspect: { [weak self] why in
        guard let self else { return }
        self.roleChannels.suspect(self.moduleID, why)
      })
    let status = backend.serveRole(caller, remote: remote)
    if status == FORSETTI_OK {
      counters.watchServeRing(serveRing)
      roleChannels.serving(
        RoleChannels.Provider(
          moduleID: moduleID, owner: ObjectIdentifier(self), concurrency: concurrency,
          role: caller.serves.flatMap { DefaultModuleRole.allCases.firstIndex(of: $0) } ?? -1,
          serveRing: serveRing, progress: progress, kill: { [weak self] verdict in self?.killHung(verdict) }))
    }
    return status
  }

  /// `roleConnect`: gives this consumer's worker a channel of its own to the provider's worker
  /// (unless it has one open), sent on the socket before the answer, so the worker finds it
  /// mapped (or about to be) when the answer comes. Never waits on the provider.
  private func connect(_ number: Int64, _ roles: RoleRegistry) -> Int32 {
    switch roles.route(number, for: caller) {
    case .refused(let status): return status
    case .relay: return FORSETTI_ERR_NOT_FOUND
    case .channel(let role, let provider, let open):
      if roleChannels.hasChannel(consumerOwner: ObjectIdentifier(self), provider: provider) {
        return FORSETTI_OK
      }
      guard let (ring, fd) = open(ObjectIdentifier(self), calls.progress) else {
        return FORSETTI_ERR_UNAVAILABLE
      }
      defer { close(fd) }
      guard send(WireFrame(.roleChannel, [.int(1), .string(role.rawValue)]), attaching: fd) else {
        ring.close()
        return FORSETTI_ERR_UNAVAILABLE
      }
      // Gone meanwhile: the sweep at its end may have run already.
      if isClosed { ring.close() }
      return FORSETTI_OK
    }
  }

}
