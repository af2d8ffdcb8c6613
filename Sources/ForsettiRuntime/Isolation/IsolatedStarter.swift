import CForsetti
import Dispatch
import ForsettiBinary
import ForsettiBridge
import ForsettiCore
import FoundationEssentials
import Glibc

/// One isolated module on its way from a new worker to started: what its worker said so far,
/// and how it ended. Driven by its worker's events alone, against its own deadline.
struct IsolatedStart {
  /// How the start ended, recorded once its level is done.
  enum Outcome {
    case started(took: Duration)
    /// The record's failure; `restart` the failure to count against the module (a crash or a
    /// violation), nil when it is not restarted (a refusal, a timeout).
    case failed(GateStep, ReasonCode, String, restart: String?)
    /// Step 8 refused the module (`identity` says why); its worker was ended.
    case identityRefused
  }

  var request: IsolatedStarter.Request
  var worker: WorkerProcess
  var fromSpare: Bool
  let began: ContinuousClock.Instant
  /// When loading must be done by, then (from the moment `start` is sent) start: each gets the
  /// whole start timeout, so a module is not charged for others sharing the machine with it.
  var deadline: ContinuousClock.Instant
  /// When the module was loaded and judged, ready for its `start`.
  var readyAt: ContinuousClock.Instant?
  /// When its `start` was sent.
  var startSent: ContinuousClock.Instant?
  var confinedDetail = ""
  /// The load step's trace detail, once the module loaded.
  var loadDetail: String?
  /// Step 8's verdict: the trace detail of a pass, or what failed.
  var identity: Result<String, GateViolation>?
  var ui: UIContributions?
  var outcome: Outcome?

  var step: GateStep { loadDetail == nil ? .load : .start }
}

/// Loads and starts isolated modules that do not depend on one another, all at once: each in
/// its own worker, each against its own deadline, so one that hangs or misbehaves holds nobody
/// else to its deadline. It records nothing: it says how each start ended, and the lifecycle
/// (`IsolatedActivation`) writes the records, in module-ID order once all are decided, so what
/// the host reports does not depend on who was quicker. Workers are spawned here, on the
/// calling (main) thread: a worker's parent-death signal belongs to the thread that spawned it.
///
/// Loading is fully concurrent. `start` is released in module-ID order: a module's start is
/// sent once every module before it in the level has returned from its own start (or failed),
/// or has been stalled in start (or in loading) for `stagger` — so well-behaved modules keep
/// the documented ID order (a module may message one with a smaller ID from its start, as the
/// bundled HelloC does to the dashboard), and a hanging one costs the modules after it
/// `stagger`, not its timeout. Loading and start each have the start timeout as their own
/// deadline, the latter from the moment `start` is sent.
struct IsolatedStarter {
  /// One module to start: what to load, with what grant, and the state to hand it.
  struct Request {
    var manifest: ModuleManifest
    var path: String
    var isSwift: Bool
    var granted: Set<Capability>
    /// Handed to the new instance after its start (hot reload).
    var state: [UInt8]?
  }

  /// How one request ended: a start driven to its outcome, or no worker for it (why).
  enum Ended {
    case ran(IsolatedStart)
    case noWorker(String)
  }

  let settings: IsolationSettings
  let environment: HostEnvironment
  /// A worker started ahead of need, taken first when ready.
  let spareWorker: SpareWorker?
  let workerSource: WorkerSource?
  let libraryGrants: LibraryGrantCache
  /// The library directories every worker may read.
  let libraryDirectories: [String]
  /// Told of every worker's exit, from its reader thread.
  let onExit: @Sendable (String, Int32) -> Void
  /// Counts each worker's sandbox against its quota once it confined itself (nil: unbounded).
  let sandboxMeter: SandboxQuotaMeter?
  /// Step 8, as the lifecycle judges it: the module's descriptor and UI against its manifest.
  let identity: (ModuleManifest, ModuleDescriptor, UIContributions?) -> Result<String, GateViolation>

  /// Drives every request to its end; the results in module-ID order, each with its `tag`.
  func run<Tag>(_ requests: [(tag: Tag, request: Request)]) -> [(tag: Tag, ended: Ended)] {
    var round = Round<Tag>(waker: EventsWaker(), stagger: .wait(Self.stagger(settings)))
    var results: [(tag: Tag, moduleID: String, ended: Ended)] = []
    let sorted = requests.sorted(by: {
      $0.request.manifest.moduleID.utf8.lexicographicallyPrecedes($1.request.manifest.moduleID.utf8)
    })
    // A large start has its places made ahead on a thread of their own (`WorkerPlaces`), and
    // takes no spare: the spare is kept for the reload it is there for.
    let places =
      sorted.count >= Self.placesAhead
      ? WorkerPlaces(
        moduleIDs: sorted.map(\.request.manifest.moduleID), environment: environment, settings: settings)
      : nil
    for (tag, r) in sorted {
      switch begin(r, places: places) {
      case .success(let s):
        s.worker.events.notify(round.waker, as: round.starts.count)
        round.starts.append((tag, s))
      case .failure(let why): results.append((tag, r.manifest.moduleID, .noWorker(why.detail)))
      }
      // The workers begun so far move on between begins: the first modules are judged and
      // released into `start` while later ones are still being forked, instead of all waiting
      // for the last fork (with 1,000 modules the forks alone take most of a second).
      _ = advance(&round, waiting: false)
    }
    while !advance(&round, waiting: true) {}
    for (tag, s) in round.starts {
      s.worker.events.notify(nil)
      results.append((tag, s.request.manifest.moduleID, .ran(s)))
    }
    return
      results
      .sorted { $0.moduleID.utf8.lexicographicallyPrecedes($1.moduleID.utf8) }
      .map { ($0.tag, $0.ended) }
  }

  /// The starts under way, and where `advance` left off.
  private struct Round<Tag> {
    let waker: EventsWaker
    let stagger: Duration
    var starts: [(tag: Tag, start: IsolatedStart)] = []
    /// The first start not yet decided: release walks from here.
    var first = 0
    /// When the earliest deadline is due: before then no deadline is scanned.
    var earliest = ContinuousClock.now
  }

  /// Handles what the workers said, ends the starts past their deadline, and releases `start`
  /// in ID order; when `waiting`, then waits for a worker to speak or the next deadline or
  /// release. Whether every start begun is decided.
  ///
  /// Only the workers that spoke are looked at, deadlines are scanned only once the earliest
  /// is due, and release walks from the first undecided start: a thousand starts cost the
  /// main thread work per event, not per event per start.
  private func advance<Tag>(_ r: inout Round<Tag>, waiting: Bool) -> Bool {
    for k in r.waker.take() where r.starts[k].start.outcome == nil {
      while r.starts[k].start.outcome == nil, let e = r.starts[k].start.worker.events.poll() {
        handle(e, &r.starts[k].start, r.waker, index: k)
      }
    }
    var now = ContinuousClock.now
    if now >= r.earliest {
      r.earliest = now + .seconds(3600)
      for k in r.first..<r.starts.count where r.starts[k].start.outcome == nil {
        // A module waiting for release is not late: its deadline moves on when it is released.
        let waiting = r.starts[k].start.readyAt != nil && r.starts[k].start.startSent == nil
        guard !waiting else { continue }
        if now >= r.starts[k].start.deadline { timedOut(&r.starts[k].start) }
        if r.starts[k].start.outcome == nil { r.earliest = min(r.earliest, r.starts[k].start.deadline) }
      }
    }
    while r.first < r.starts.count, r.starts[r.first].start.outcome != nil { r.first += 1 }
    guard r.first < r.starts.count else { return true }
    // Release starts in ID order, behind any earlier module still busy within `stagger`.
    var next = r.earliest
    now = ContinuousClock.now
    for k in r.first..<r.starts.count where r.starts[k].start.outcome == nil {
      if r.starts[k].start.readyAt != nil, r.starts[k].start.startSent == nil {
        r.starts[k].start.deadline = now + .wait(settings.startTimeout)
        r.starts[k].start.startSent = now
        r.earliest = min(r.earliest, r.starts[k].start.deadline)
        // False only if the worker broke off meanwhile: its next event says how.
        _ = r.starts[k].start.worker.start(state: r.starts[k].start.request.state ?? [])
      }
      let busySince = r.starts[k].start.startSent ?? r.starts[k].start.began
      if now < busySince + r.stagger {
        next = min(next, busySince + r.stagger)
        break
      }
    }
    if waiting { r.waker.wait(until: min(next, r.earliest)) }
    return false
  }

  /// From how many modules on a start has their places made ahead (`WorkerPlaces`): below it a
  /// thread of its own would cost more than it saves.
  static let placesAhead = 8

  /// How long a module busy in start (or loading) holds back the next one's start in its
  /// level: a quarter of the start timeout, at most one second.
  static func stagger(_ settings: IsolationSettings) -> Double { min(1, max(0, settings.startTimeout / 4)) }

  /// Why no worker could be had for a module: the load step's detail.
  struct NoWorker: Error {
    var detail: String
  }

  /// A worker told its module (the spare, if one is ready), or why none could be.
  private func begin(_ r: Request, places: WorkerPlaces?) -> Result<IsolatedStart, NoWorker> {
    let began = ContinuousClock.now
    var fromSpare = false
    let started: StartedWorker
    var placed: WorkerCgroup?
    var prepared: WorkerCgroup?
    if let places {
      switch places.next() {
      case .success(let place): prepared = place.cgroup
      case .failure(let e): return .failure(e)
      }
      switch spawnWorker() {
      case .success(let s): started = s
      case .failure(let e):
        if let prepared { WorkerCgroupHold.release(prepared) }
        return .failure(e)
      }
    } else {
      // The sandbox before the spare is taken, so a module whose sandbox cannot be made costs
      // no spare; the cgroup at `configure` (a spare brings its own, made before its module
      // was known).
      if case .failure(let e) = WorkerPlace.make(
        moduleID: r.manifest.moduleID, withCgroup: false, environment: environment, settings: settings)
      {
        return .failure(e)
      }
      if let spare = spareWorker?.take() {
        started = spare.worker
        placed = spare.cgroup
        fromSpare = true
      } else {
        switch spawnWorker() {
        case .success(let s): started = s
        case .failure(let e): return .failure(e)
        }
      }
    }
    let worker: WorkerProcess
    switch configure(started, r, placed: placed, prepared: prepared) {
    case .success(let w): worker = w
    case .failure(let e): return .failure(e)
    }
    // From the moment the worker exists: the time the host took to get one (a stuck zygote
    // replaced, `WorkerSource`) is the host's, not the module's.
    return .success(
      IsolatedStart(
        request: r, worker: worker, fromSpare: fromSpare, began: began,
        deadline: .now + .wait(settings.startTimeout)))
  }

  private func configuration(_ a: Request, memoryAccounted: Bool, libraries: [String]) -> WorkerConfiguration
  {
    let sandbox = environment.sandboxPath(for: a.manifest.moduleID)
    let dir = PathText.parent(a.path)
    var limits = settings.limits
    limits.fileSizeBytes = SandboxQuota.startLimit(
      fileSizeBytes: limits.fileSizeBytes, quota: settings.sandboxBytes)
    var readExecute = [a.path, dir, settings.workerExecutable, "/etc/ld.so.cache"] + libraryDirectories
    readExecute += libraries.filter { !readExecute.contains($0) }
    let policy = ConfinementPolicy(
      readExecute: readExecute,
      readWrite: [sandbox, "/dev/null"], networking: a.granted.contains(.networking),
      limits: limits, memoryAccounted: memoryAccounted,
      temporaryDirectory: sandbox + "/" + WorkerEnvironment.temporaryDirectory)
    return WorkerConfiguration(
      moduleID: a.manifest.moduleID, library: a.path, entryPoint: a.manifest.entryPoint, isSwift: a.isSwift,
      sandbox: sandbox, granted: a.granted, serves: a.manifest.defaultModuleRole,
      calls: StartOrder.consumedRoles(a.manifest), policy: policy, parent: getpid(),
      environment: settings.workerEnvironment.module(
        sandbox: sandbox, host: ProcessInfo.processInfo.environment))
  }

  /// A new worker process, waiting for its configuration.
  private func spawnWorker() -> Result<StartedWorker, NoWorker> {
    do {
      return .success(
        try (workerSource ?? WorkerSource(executable: settings.workerExecutable, forks: false)).start())
    } catch {
      return .failure(NoWorker(detail: "could not start a worker: \(error)"))
    }
  }

  /// A new worker told its module: spawned, put in its cgroup, then configured.
  private func freshWorker(_ r: Request) -> Result<WorkerProcess, NoWorker> {
    switch spawnWorker() {
    case .success(let started): configure(started, r)
    case .failure(let e): .failure(e)
    }
  }

  /// Makes `started` a cgroup of its own (when the host has cgroups), which the worker joins
  /// before it is told its module (`WorkerProcess`): it has run no code of a module outside it.
  /// nil after recording why the module cannot run there.
  private func configure(
    _ started: StartedWorker, _ a: Request, placed: WorkerCgroup? = nil, prepared: WorkerCgroup? = nil
  ) -> Result<WorkerProcess, NoWorker> {
    var cgroup = placed ?? prepared
    let id = a.manifest.moduleID
    // The directories of the module's own libraries (its DT_NEEDED, found as the loader finds
    // them): read/execute, before the worker confines itself.
    let grants = libraryGrants.grants(for: a.path)
    if let refused = grants?.refused.first {
      started.discard()
      if let cgroup { WorkerCgroupHold.release(cgroup) }
      return .failure(
        NoWorker(
          detail:
            "library \(refused.library) is in \(refused.directory), which a worker may not read: \(refused.reason); "
            + "ship it in a directory of its own (DT_RUNPATH $ORIGIN/…) or a system library directory"))
    }
    if let placed {
      // A spare's cgroup was made before its module was known: the module's CPU share now.
      do {
        try placed.setCPU(weight: settings.cpu.weight(for: id), maxPercent: settings.cpu.maxPercent(for: id))
      } catch {
        started.discard()
        WorkerCgroupHold.release(placed)
        return .failure(NoWorker(detail: "could not give the worker its CPU share: \(error)"))
      }
    } else if prepared == nil, case .success(let cgroups) = HostCgroups.workerCgroups {
      do {
        cgroup = try cgroups.create(moduleID: id, limits: HostCgroups.limits(id, settings))
      } catch {
        started.discard()
        return .failure(NoWorker(detail: "could not make the worker a cgroup of its own: \(error)"))
      }
    }
    let crashFiles = CrashSymbolizer.Files(
      module: a.path, moduleDirectories: grants?.granted ?? [], worker: settings.workerExecutable,
      libraryDirectories: libraryDirectories)
    return .success(
      WorkerProcess(
        started,
        configuration: configuration(a, memoryAccounted: cgroup != nil, libraries: grants?.granted ?? []),
        cgroup: cgroup, joined: placed != nil, environment: environment, crashFiles: crashFiles,
        onExit: onExit))
  }

  /// Moves one start on by one event from its worker (read by `WorkerProcess.startStep`).
  private func handle(
    _ e: WorkerEvent, _ s: inout IsolatedStart, _ waker: EventsWaker, index: Int
  ) {
    if case .frame(let f) = e { return handle(f, &s) }
    let progress = WorkerStartProgress(
      fromSpare: s.fromSpare, confined: !s.confinedDetail.isEmpty, loaded: s.loadDetail != nil,
      startSent: s.startSent != nil)
    switch s.worker.startStep(after: e, progress) {
    case .failed(let step, let reason, let detail, let restart):
      s.outcome = .failed(step, reason, detail, restart: restart)
    case .spareLost:
      s.fromSpare = false
      switch freshWorker(s.request) {
      case .success(let w):
        w.events.notify(waker, as: index)
        s.worker = w
      case .failure(let e):
        s.outcome = .failed(.load, .loadFailed, e.detail, restart: nil)
      }
    case .confined, .loaded, .started, .nothing:
      break
    }
  }

  private func handle(_ f: WireFrame, _ s: inout IsolatedStart) {
    let progress = WorkerStartProgress(
      fromSpare: s.fromSpare, confined: !s.confinedDetail.isEmpty, loaded: s.loadDetail != nil,
      startSent: s.startSent != nil)
    switch s.worker.startStep(after: f, progress) {
    case .confined(let summary):
      s.confinedDetail = summary
      if let meter = sandboxMeter {
        // Now, not at configure: the worker's own setrlimit is behind it, so a soft limit of 0
        // the meter sets is never undone by it.
        meter.watch(
          moduleID: s.request.manifest.moduleID,
          sandbox: environment.sandboxPath(for: s.request.manifest.moduleID), worker: s.worker)
      }
    case .loaded(let descriptor, let ui):
      s.loadDetail = "loaded \(s.request.path) in worker pid \(s.worker.pid) (\(s.confinedDetail))"
      let verdict = identity(s.request.manifest, descriptor, ui)
      s.identity = verdict
      s.ui = ui
      if case .failure = verdict {
        s.worker.end()
        s.outcome = .identityRefused
        return
      }
      s.readyAt = ContinuousClock.now
    case .started:
      s.outcome = .started(took: ContinuousClock.now - s.began)
    case .failed(let step, let reason, let detail, let restart):
      s.outcome = .failed(step, reason, detail, restart: restart)
    case .spareLost, .nothing:
      break
    }
  }

  private func timedOut(_ s: inout IsolatedStart) {
    let progress = WorkerStartProgress(
      fromSpare: s.fromSpare, confined: !s.confinedDetail.isEmpty, loaded: s.loadDetail != nil,
      startSent: s.startSent != nil)
    if case .failed(let step, let reason, let detail, let restart) = s.worker.startTimedOut(
      progress, after: settings.startTimeout)
    {
      s.outcome = .failed(step, reason, detail, restart: restart)
    }
  }
}
