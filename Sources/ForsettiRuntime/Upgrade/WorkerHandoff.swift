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
    private var handed: (workers: [WorkerHandover], channels: [ChannelHandover])?
    init() {}
    func set(_ workers: [WorkerHandover], _ channels: [ChannelHandover]) { handed = (workers, channels) }
    func take() -> (workers: [WorkerHandover], channels: [ChannelHandover])? {
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
  func gather() -> Result<(workers: [WorkerHandover], channels: [ChannelHandover]), Refusal> {
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
    return .success((out, channels))
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

  /// Serves the workers `handed` over by the image before this one, each in its judged slot:
  /// the modules IDs kept running. `load` says what a start of a module would load now (its
  /// binary, the file loaded). Call before the first start.
  @discardableResult
  func adopt(
    _ handed: [WorkerHandover], channels: [ChannelHandover],
    load: (ModuleManifest) -> (binary: String, path: String)?
  ) -> Set<String> {
    // Numbered above every ID and cgroup the previous image gave: a module subscribing, or a
    // worker's cgroup made, meanwhile never gets one of those.
    environment.events.reserve(upTo: handed.flatMap(\.subscriptions).map(\.id).max() ?? 0)
    if case .success(let cgroups) = HostCgroups.workerCgroups {
      cgroups.counted(handed.flatMap(\.cgroup).map(\.directory))
    }
    // Every part of the host a worker reaches is entered again — every worker's subscriptions,
    // handler and role, the channels — before any worker is served: a worker served first could
    // publish to a subscriber, or call a provider, not yet back.
    var adopted: [String: WorkerProcess] = [:]
    var ending: [(WorkerHandover, WorkerProcess)] = []
    var served: [(WorkerHandover, WorkerProcess)] = []
    for h in handed {
      let now = table.handle(of: h.moduleID).flatMap { table[$0].manifest }.flatMap(load)
      switch adopt(h, loads: now) {
      case .kept(let w):
        adopted[h.moduleID] = w
        served.append((h, w))
      case .ending(let w): ending.append((h, w))
      case .gone: break
      }
    }
    for c in channels {
      guard let ring = ChannelRing.adopt(fd: c.fd) else {
        close(c.fd)
        continue
      }
      guard let consumer = adopted[c.consumer], let provider = adopted[c.provider] else {
        // An end was not kept: the other end's calls on it end now (and go through the host).
        ring.close()
        continue
      }
      environment.roleChannels.adopt(
        RoleChannels.Channel(
          consumer: c.consumer, consumerOwner: ObjectIdentifier(consumer), provider: c.provider,
          providerOwner: ObjectIdentifier(provider), ring: ring), consumerProgress: consumer.calls.progress)
      provider.counters.countRoleCalls(on: ring)
    }
    for (h, w) in served + ending { w.serveAdopted(output: h.outputFD) }
    for (_, w) in ending {
      w.prepareStop()
      _ = IsolatedInstance(worker: w, stopTimeout: workers.settings.stopTimeout).stop()
    }
    return Set(adopted.keys)
  }

  /// What became of one handed-over worker.
  private enum Adoption {
    /// Served in its slot.
    case kept(WorkerProcess)
    /// Served only to be stopped (why logged).
    case ending(WorkerProcess)
    /// Not served: it ended, or is no child of this host (why logged).
    case gone
  }

  /// One worker, entered in its slot or to be stopped; not yet served (`serveAdopted`).
  /// `loads` is what a start of its module would load now.
  private func adopt(_ h: WorkerHandover, loads: (binary: String, path: String)?) -> Adoption {
    func drop(_ why: String) {
      environment.hostLog(.warning, about: h.moduleID, "its worker (pid \(h.pid)) was not kept: \(why)")
    }
    // Ours to serve only while it is this process's child and alive: a pid reaped or another's
    // is never signalled.
    let cgroup = Self.cgroup(h)
    var status: Int32 = 0
    let waited = waitpid(h.pid, &status, WNOHANG)
    guard waited == 0 else {
      for fd in h.descriptors { close(fd) }
      if waited == h.pid, let cgroup { WorkerCgroupHold.release(cgroup) }
      drop(
        waited == h.pid
          ? "it ended during the upgrade; its module starts anew"
          : "it is not a child of this host")
      return .gone
    }
    let i = table.handle(of: h.moduleID)
    let slot = i.map { table[$0] }
    let manifest = slot?.manifest
    let keep: String? =
      if !ProtocolVersion.adoptable.contains(h.protocolVersion) {
        "it speaks worker protocol \(h.protocolVersion), which this version does not serve (\(ProtocolVersion.adoptable.lowerBound)–\(ProtocolVersion.adoptable.upperBound)); it is started anew"
      } else if slot?.record.state != .gated {
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
    let caller = ModuleCaller(
      moduleID: h.moduleID, granted: slot?.record.granted ?? [], serves: manifest?.defaultModuleRole,
      calls: manifest.map(StartOrder.consumedRoles) ?? [])
    let files = CrashSymbolizer.Files(
      module: h.loadedFrom, moduleDirectories: [], worker: workers.settings.workerExecutable,
      libraryDirectories: workers.libraryDirectories)
    guard
      let worker = WorkerProcess(
        adopting: h, caller: caller, cgroup: cgroup, environment: environment, crashFiles: files,
        onExit: { [inbox] id, pid in inbox.post(id, pid: pid) })
    else {
      for fd in h.descriptors { close(fd) }
      kill(h.pid, SIGKILL)
      _ = waitpid(h.pid, &status, 0)
      if let cgroup { WorkerCgroupHold.release(cgroup) }
      drop("its rings could not be mapped; it was killed, and its module starts anew")
      return .gone
    }
    let instance = IsolatedInstance(worker: worker, stopTimeout: workers.settings.stopTimeout)
    guard let i, let manifest, keep == nil else {
      drop("\(keep ?? ""); stopping it")
      return .ending(worker)
    }
    for s in h.subscriptions where worker.subscribe(s.type, restoring: s.id) < 0 {
      environment.hostLog(
        .warning, about: h.moduleID, "its subscription \(s.id) to \"\(s.type)\" could not be entered again")
    }
    if h.messageHandler { _ = worker.takeMessages(true) }
    if let n = h.serving, worker.serve(concurrency: n) != FORSETTI_OK {
      environment.hostLog(.warning, about: h.moduleID, "it could not be entered as its role's provider again")
    }
    workers.sandboxMeter?.watch(
      moduleID: h.moduleID, sandbox: environment.sandboxPath(for: h.moduleID), worker: worker)
    let ui = h.ui.flatMap { WorkerCodec.decodeLoaded(JSONWriter.string($0))?.1 }
    table[i].loading(from: h.loadedFrom, isSwift: h.loadedIsSwift, binary: h.binaryPath)
    table[i].passed(.load, "kept loaded in worker pid \(h.pid) across an upgrade of the host")
    table[i].kept(
      instance, sequence: table.nextStart(), ui: ui,
      detail: "kept running in worker pid \(h.pid) across an upgrade of the host")
    environment.hostLog(
      .info, "kept \(manifest.moduleID) \(manifest.moduleVersion) running (worker pid \(h.pid))",
      subject: manifest.moduleID)
    return .kept(worker)
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
