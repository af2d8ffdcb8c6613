import CForsetti
import CForsettiSys
import ForsettiBridge
import ForsettiCore
import Glibc

/// The running modules' side of an upgrade of the host: the image that hands over gathers each
/// running module's worker and the role channels between them (`gather`, its loop paused, so
/// nothing is half read or half answered); the image that takes over serves the same workers
/// (`adopt`), before it starts anything, so no module is stopped or started. A worker the new
/// image would confine differently (another grant, another binary) or cannot serve is stopped
/// then, with the reason; the normal start that follows starts its module anew.
///
/// Used from the host's main thread, like the table.
struct WorkerHandoff {
  /// Workers handed over and not yet adopted: taken by the first round of the image that took
  /// the host over (`Reconciler`), once.
  final class Pending {
    /// The workers entered and served, to be judged; the crash counts and pending restarts.
    struct Entered {
      var workers: [(WorkerHandover, WorkerProcess)]
      var restarts: [RestartHandover]
    }
    private var handed: Entered?
    init() {}
    func set(_ handed: Entered) { self.handed = handed }
    func take() -> Entered? {
      defer { handed = nil }
      return handed
    }
  }

  let table: ModuleTable
  let environment: HostEnvironment
  let workers: WorkerSupply
  let inbox: SupervisorInbox

  typealias Refusal = WorkerHandoffRefusal

  /// Every running module's worker and the channels between them; the first module that cannot
  /// be handed over refuses the upgrade.
  func gather() -> Result<HandedModules, Refusal> {
    var out: [WorkerHandover] = []
    for i in table.running {
      let slot = table[i]
      let id = slot.moduleID ?? "?"
      guard let instance = slot.instance as? IsolatedInstance else {
        return .failure(
          Refusal(moduleID: id, why: "runs in the host's process, which a new image does not keep"))
      }
      let w = instance.worker
      guard let h = w.handover else {
        return .failure(Refusal(moduleID: id, why: "is \(w.session.phase), not running steadily; try again"))
      }
      let ui = slot.ui.flatMap { ui in
        slot.manifest.map {
          WorkerCodec.loaded(
            ModuleDescriptor(
              moduleID: $0.moduleID, moduleType: $0.moduleType, moduleVersion: $0.moduleVersion), ui)
        }
      }
      out.append(
        WorkerHandover(
          moduleID: id, pid: w.pid, socketFD: h.socket, ringFD: h.ring, doorbellFD: h.doorbell,
          outputFD: h.output,
          pendingOutput: Array(h.pending.prefix(WorkerHandover.maxPending)),
          recentLines: w.recentLines.map(WorkerHandover.cut),
          cgroup: w.cgroupPlaces.map {
            .init(
              version: $0.version.rawValue, directory: $0.directory,
              controllers: $0.controllers.map(\.rawValue))
          },
          subscriptions: environment.events.subscriptions(of: id).map { .init(id: $0.id, type: $0.type) },
          messageHandler: environment.messages.hasHandler(id),
          serving: environment.roleChannels.concurrency(of: id),
          granted: slot.record.granted.map(\.rawValue).sorted(),
          serves: slot.manifest?.defaultModuleRole?.rawValue,
          calls: slot.manifest.map { StartOrder.consumedRoles($0).map(\.rawValue).sorted() } ?? [],
          loadedFrom: slot.record.loadedFrom ?? slot.record.binaryPath ?? "",
          loadedIsSwift: slot.record.loadedIsSwift, binaryPath: slot.record.binaryPath, ui: ui))
    }
    let handed = Set(out.map(\.moduleID))
    let channels = environment.roleChannels.handover().compactMap { c -> ChannelHandover? in
      guard c.ring.descriptor >= 0, handed.contains(c.consumer), handed.contains(c.provider) else {
        return nil
      }
      return ChannelHandover(consumer: c.consumer, provider: c.provider, fd: c.ring.descriptor)
    }
    let now = ContinuousClock.now
    let restarts = table.handles.compactMap { i -> RestartHandover? in
      guard let r = table[i].restart, let id = table[i].moduleID else { return nil }
      let due = r.due.map { max(0, Int(($0 - now) / .milliseconds(1))) }
      return RestartHandover(
        moduleID: id, crashes: r.crashes, dueInMilliseconds: due, lastFailure: r.lastFailure,
        reason: table[i].record.state.reason?.rawValue)
    }
    return .success(HandedModules(workers: out, channels: channels, restarts: restarts))
  }

  /// Enters the crash counts and pending restarts `handed` over: a module kept running counts
  /// on from its crashes; one waiting to restart is taken out of `toStart` and restarted when it
  /// was due.
  func restore(_ handed: [RestartHandover], toStart: inout [SlotHandle]) {
    for r in handed {
      guard let i = table.handle(of: r.moduleID) else { continue }
      if table[i].isRunning {
        table[i].willRestart(crashes: r.crashes, due: .now, failure: r.lastFailure)
        table[i].restartTaken()
      } else if let ms = r.dueInMilliseconds, let at = toStart.firstIndex(of: i) {
        toStart.remove(at: at)
        table[i].held(.failed(r.reason.flatMap(ReasonCode.init(rawValue:)) ?? .crashed))
        table[i].willRestart(crashes: r.crashes, due: .now + .milliseconds(ms), failure: r.lastFailure)
        environment.hostLog(
          .info,
          "will restart \(r.moduleID) in \(Double(ms) / 1000) s (crash \(r.crashes)), as before the upgrade",
          subject: r.moduleID)
      }
    }
  }

  /// Ends workers handed over to an image that cannot serve them (one running modules in its
  /// own process): killed, and said so.
  static func end(_ handed: [WorkerHandover], _ channels: [ChannelHandover], environment: HostEnvironment) {
    for c in channels { close(c.fd) }
    for h in handed {
      for fd in h.descriptors { close(fd) }
      let cgroup = cgroup(h)
      defer { if let cgroup { WorkerCgroupHold.release(cgroup) } }
      var status: Int32 = 0
      guard waitpid(h.pid, &status, WNOHANG) == 0 else { continue }
      kill(h.pid, SIGKILL)
      _ = waitpid(h.pid, &status, 0)
      environment.hostLog(
        .warning, about: h.moduleID,
        "its worker (pid \(h.pid)) was ended: this image runs modules in its own process, not in workers")
    }
  }

  /// Serves the workers `handed` over by the image before this one, as soon as the image has
  /// its environment — before it judges anything: every worker is entered first (its
  /// subscriptions, handler and role, then the channels), and only then are they served, all at
  /// once (one served before another's subscription is back could publish to a listener not yet
  /// there). Each is served as it was bound (its grant and roles) until `judge` decides, in the
  /// first round, whether it is kept.
  func enter(_ handed: [WorkerHandover], channels: [ChannelHandover]) -> [(WorkerHandover, WorkerProcess)] {
    // Numbered above every ID and cgroup the previous image gave: a module subscribing, or a
    // worker's cgroup made, meanwhile never gets one of those.
    environment.events.reserve(upTo: handed.flatMap(\.subscriptions).map(\.id).max() ?? 0)
    if case .success(let cgroups) = HostCgroups.workerCgroups {
      cgroups.counted(handed.flatMap(\.cgroup).map(\.directory))
    }
    var entered: [(WorkerHandover, WorkerProcess)] = []
    var byID: [String: WorkerProcess] = [:]
    for h in handed {
      guard let w = enter(h) else { continue }
      entered.append((h, w))
      byID[h.moduleID] = w
    }
    for c in channels {
      guard let ring = ChannelRing.adopt(fd: c.fd) else {
        close(c.fd)
        continue
      }
      guard let consumer = byID[c.consumer], let provider = byID[c.provider] else {
        // An end did not come through: the other end's calls on it end now.
        ring.close()
        continue
      }
      environment.roleChannels.adopt(
        RoleChannels.Channel(
          consumer: c.consumer, consumerOwner: ObjectIdentifier(consumer), provider: c.provider,
          providerOwner: ObjectIdentifier(provider), ring: ring), consumerProgress: consumer.calls.progress)
      provider.counters.countRoleCalls(on: ring)
    }
    for (h, w) in entered { w.serveAdopted(output: h.outputFD) }
    return entered
  }

  /// Judges each worker `enter` served, in the first round (the table holds this image's
  /// verdicts): kept in its slot, or stopped with the reason, as the image before would have
  /// stopped it. `load` says what a start of a module would load now (its binary, the file
  /// loaded: read from disk, the costly part). The module IDs kept.
  @discardableResult
  func judge(
    _ entered: [(WorkerHandover, WorkerProcess)], load: (ModuleManifest) -> (binary: String, path: String)?
  ) -> Set<String> {
    var kept: Set<String> = []
    var ending: [WorkerProcess] = []
    for (h, w) in entered {
      let loads = table.handle(of: h.moduleID).flatMap { table[$0].manifest }.flatMap(load)
      if judge(h, w, loads: loads) {
        kept.insert(h.moduleID)
      } else {
        ending.append(w)
      }
    }
    // Taken off the bus and out of their channels together, then stopped one by one.
    for w in ending { w.prepareStop() }
    for w in ending { _ = IsolatedInstance(worker: w, stopTimeout: workers.settings.stopTimeout).stop() }
    return kept
  }

  /// One worker entered, not yet served: its process checked to be this host's live child, its
  /// rings mapped, its subscriptions, handler and role entered again as its worker was bound
  /// for them. Nil (said why) when it cannot be: it ended, is no child of this host, speaks a
  /// protocol this version does not, or its rings cannot be mapped.
  private func enter(_ h: WorkerHandover) -> WorkerProcess? {
    func drop(_ why: String) {
      environment.hostLog(.warning, about: h.moduleID, "its worker (pid \(h.pid)) was not kept: \(why)")
    }
    let cgroup = Self.cgroup(h)
    // Ours to serve only while it is this process's child and alive: a pid reaped or another's
    // is never signalled.
    var status: Int32 = 0
    let waited = waitpid(h.pid, &status, WNOHANG)
    guard waited == 0 else {
      for fd in h.descriptors { close(fd) }
      if waited == h.pid, let cgroup { WorkerCgroupHold.release(cgroup) }
      drop(
        waited == h.pid
          ? "it ended during the upgrade; its module starts anew" : "it is not a child of this host")
      return nil
    }
    func end(_ why: String) {
      for fd in h.descriptors { close(fd) }
      kill(h.pid, SIGKILL)
      _ = waitpid(h.pid, &status, 0)
      if let cgroup { WorkerCgroupHold.release(cgroup) }
      drop("\(why); it was killed, and its module starts anew")
    }
    guard ProtocolVersion.adoptable.contains(h.protocolVersion) else {
      // Nothing is sent to a worker of a protocol this version does not speak: not even `stop`.
      end(
        "it speaks worker protocol \(h.protocolVersion), which this version does not serve (\(ProtocolVersion.adoptable.lowerBound)–\(ProtocolVersion.adoptable.upperBound))"
      )
      return nil
    }
    let caller = ModuleCaller(
      moduleID: h.moduleID, granted: Set(h.granted.compactMap(Capability.init(rawValue:))),
      serves: h.serves.flatMap(DefaultModuleRole.init(rawValue:)),
      calls: Set(h.calls.compactMap(DefaultModuleRole.init(rawValue:))))
    let files = CrashSymbolizer.Files(
      module: h.loadedFrom, moduleDirectories: [], worker: workers.settings.workerExecutable,
      libraryDirectories: workers.libraryDirectories)
    guard
      let worker = WorkerProcess(
        adopting: h, caller: caller, cgroup: cgroup, environment: environment, crashFiles: files,
        onExit: { [inbox] id, pid in inbox.post(id, pid: pid) })
    else {
      end("its rings could not be mapped")
      return nil
    }
    for s in h.subscriptions where worker.subscribe(s.type, restoring: s.id) < 0 {
      environment.hostLog(
        .warning, about: h.moduleID, "its subscription \(s.id) to \"\(s.type)\" could not be entered again")
    }
    if h.messageHandler { _ = worker.takeMessages(true) }
    if let n = h.serving, worker.serve(concurrency: n) != FORSETTI_OK {
      environment.hostLog(.warning, about: h.moduleID, "it could not be entered as its role's provider again")
    }
    return worker
  }

  /// Whether the worker `w`, served, is kept in its slot: only if this image's verdict still
  /// starts its module with the grant, roles and loaded file it was confined and bound for
  /// (`loads`: what a start would load now). Otherwise said why (it is then stopped).
  private func judge(_ h: WorkerHandover, _ w: WorkerProcess, loads: (binary: String, path: String)?) -> Bool
  {
    let i = table.handle(of: h.moduleID)
    let slot = i.map { table[$0] }
    let manifest = slot?.manifest
    let refusal: String? =
      if slot?.record.state != .gated {
        "the new image does not start \(h.moduleID) (\(slot.map { "\($0.record.state)" } ?? "no manifest"))"
      } else if slot?.record.granted.map(\.rawValue).sorted() != h.granted {
        "the new image grants it other capabilities; it is started anew"
      } else if manifest?.defaultModuleRole?.rawValue != h.serves
        || manifest.map({ StartOrder.consumedRoles($0).map(\.rawValue).sorted() }) != h.calls
      {
        "its manifest names other roles now; it is started anew"
      } else if loads?.binary != h.binaryPath || loads?.path != h.loadedFrom {
        "its binary is another now (\(loads?.path ?? "none found"), not \(h.loadedFrom)); it is started anew"
      } else {
        nil
      }
    guard let i, let manifest, refusal == nil else {
      environment.hostLog(
        .warning, about: h.moduleID, "its worker (pid \(h.pid)) was not kept: \(refusal ?? ""); stopping it")
      return false
    }
    workers.sandboxMeter?.watch(
      moduleID: h.moduleID, sandbox: environment.sandboxPath(for: h.moduleID), worker: w)
    let ui = h.ui.flatMap { WorkerCodec.decodeLoaded(JSONWriter.string($0))?.1 }
    table[i].loading(from: h.loadedFrom, isSwift: h.loadedIsSwift, binary: h.binaryPath)
    table[i].passed(.load, "kept loaded in worker pid \(h.pid) across an upgrade of the host")
    table[i].kept(
      IsolatedInstance(worker: w, stopTimeout: workers.settings.stopTimeout), sequence: table.nextStart(),
      ui: ui,
      detail: "kept running in worker pid \(h.pid) across an upgrade of the host")
    environment.hostLog(
      .info, "kept \(manifest.moduleID) \(manifest.moduleVersion) running (worker pid \(h.pid))",
      subject: manifest.moduleID)
    return true
  }

  /// The worker's cgroup as the handover names it; nil when the host had none.
  private static func cgroup(_ h: WorkerHandover) -> WorkerCgroup? {
    guard !h.cgroup.isEmpty else { return nil }
    return WorkerCgroup(
      places: h.cgroup.compactMap { p in
        CgroupPlacement.Version(rawValue: p.version).map {
          WorkerCgroup.Place(
            version: $0, directory: p.directory, controllers: p.controllers.compactMap(CgroupController.init))
        }
      }, files: KernelCgroupFiles(), hostPID: getpid())
  }
}

/// Why a running module's worker cannot be handed over to a new image of the host.
package struct WorkerHandoffRefusal: Error, CustomStringConvertible {
  package var moduleID: String
  package var why: String
  package var description: String { "\(moduleID) \(why)" }
}
