import CForsetti
import ForsettiBinary
import ForsettiBridge
import ForsettiCore
import FoundationEssentials
import Glibc

/// The module table and the one lifecycle of its modules: load → identity and UI → start, in
/// provider-first order; supervision of what runs; stop in reverse. One module's failure is
/// recorded against it and never stops others. Reconciliation (`Reconciler.swift`), reload
/// (`Reload.swift`), supervision (`Supervision.swift`) and the isolated start's records
/// (`IsolatedActivation.swift`) change modules only through these slots, reached by
/// `SlotHandle`; the isolated start itself (`IsolatedStarter`) and the workers' cgroups
/// (`HostCgroups`) are Isolation's, given what they need.
///
/// Used from one thread (the host's main thread): module `start` and `stop` are called there, as
/// forsetti.h promises.
package final class ModuleManager {
  package let environment: HostEnvironment
  private let loader: any ModuleLoading
  package let mode: ExecutionMode
  var table = ModuleTable()
  let inbox = SupervisorInbox()
  let quarantine: QuarantineStore
  var index = BinaryIndex()
  /// Writes `runtime.json` and `surface.json` when they change.
  let stateFiles = RuntimeStatePublisher()
  /// The state directory the host holds by identity: `runtime.json` and `surface.json` go into
  /// it, never into another directory put at its path (nil: written by path).
  package var stateDirectoryHold: StateDirectoryHold? {
    get { stateFiles.hold }
    set { stateFiles.hold = newValue }
  }
  /// Counts starts, so modules stop in the reverse order of their starts.
  private var starts = 0

  /// Everything the host knows about each module, in the order their files were judged.
  package var records: [ModuleRecord] { table.records }

  /// Load every binary from a content-named copy under `STATE/versions/` (hot reload needs the
  /// old version after the file is replaced, and a fresh path so the loader maps the new one).
  package var versionCopies = false

  /// Keep one worker process started ahead of need (isolated mode), so that a reload or a
  /// restart does not wait for a process to start (`dev` turns it on).
  package var keepsSpareWorker = false {
    didSet {
      guard keepsSpareWorker else {
        spareWorker?.shutdown()
        spareWorker = nil
        return
      }
      guard spareWorker == nil, let source = workerSource, let settings = isolation else { return }
      let spare = SpareWorker(source: source) { pid in HostCgroups.placeSpare(pid, settings) }
      spare.refill()
      spareWorker = spare
    }
  }
  var spareWorker: SpareWorker?
  /// Where this host's workers come from (isolated mode): its zygote, or spawns.
  let workerSource: WorkerSource?
  /// The library directories every worker may read (`IsolationSettings.libraryDirectories`),
  /// read from this process's maps once, at the first worker, not at each.
  lazy var workerLibraryDirectories = IsolationSettings.libraryDirectories()
  /// The directories of each module's own libraries a worker may read (`LibraryGrants`).
  lazy var libraryGrants = LibraryGrantCache(
    protected: [environment.stateDirectory] + (environment.services.fileExport.directory.map { [$0] } ?? []))

  /// Starts a spare worker if one is kept and was used; called where the host's main thread is
  /// done with a batch of starts (a reload, a supervision round), not in the middle of one.
  func refillSpareWorker() { spareWorker?.refill() }

  package init(
    environment: HostEnvironment, loader: any ModuleLoading = DynamicLoader(),
    mode: ExecutionMode = .inProcess
  ) {
    self.environment = environment
    self.loader = loader
    self.mode = mode
    quarantine = QuarantineStore(stateDirectory: environment.stateDirectory)
    if case .isolated(let settings) = mode {
      let source = WorkerSource(executable: settings.workerExecutable, forks: settings.zygote) {
        [environment] line in environment.hostLog(.warning, line)
      }
      // Now, so its start overlaps the judging that comes before the first worker; here, on the
      // thread that starts workers, whose death the zygote and its workers share.
      source.prepare()
      workerSource = source
    } else {
      workerSource = nil
    }
  }

  deinit {
    workerSource?.shutdown()
    sandboxMeter?.shutdown()
  }

  /// Counts every isolated module's sandbox against `--sandbox-quota` (`SandboxQuotaMeter`).
  lazy var sandboxMeter: SandboxQuotaMeter? = isolation?.sandboxBytes.map { quota in
    SandboxQuotaMeter(quota: quota) { [environment] id, level, message in
      environment.hostLog(level, about: id, message)
    }
  }

  /// The isolation settings, when modules run in workers.
  var isolation: IsolationSettings? { if case .isolated(let s) = mode { s } else { nil } }

  /// Called (from any thread) when supervision has work: a worker exited. The host's loop uses
  /// it to wake and then calls `superviseOnce()` on the main thread.
  package func onSupervisionNeeded(_ wake: @escaping @Sendable () -> Void) { inbox.setWake(wake) }

  /// The start line about the workers' cgroups (`HostCgroups.support`), where the command line
  /// has always asked for it.
  package static var cgroupSupport: String { HostCgroups.support }

  /// The start line with the CPU shares in force (`HostCgroups.support(cpu:)`).
  package static func cgroupSupport(cpu: CPUShares) -> String { HostCgroups.support(cpu: cpu) }

  /// The composed UI surface of the started modules.
  package var surface: Surface {
    Surface.compose(
      Dictionary(
        table.slots.compactMap { s in s.ui.flatMap { ui in s.moduleID.map { ($0, ui) } } }
      ) { a, _ in a })
  }

  /// Takes the gate stack's judgements, then loads and starts every module that passed.
  package func activate(_ judgements: [ModuleJudgement], index: BinaryIndex) {
    self.index = index
    table.removeAll()
    for j in judgements { table.append(ModuleSlot(ModuleRecord(judgement: j))) }
    start(table.handles.filter { table[$0].record.state == .gated })
    persist()
    refillSpareWorker()
  }

  /// Loads and starts the gated modules of `slots`, providers first.
  func start(_ slots: [SlotHandle]) {
    let byID = Dictionary(slots.compactMap { i in table[i].moduleID.map { ($0, i) } }) { a, _ in a }
    let manifests = slots.compactMap { table[$0].manifest }
    switch mode {
    case .inProcess:
      // On the main thread one by one, as forsetti.h promises.
      for m in StartOrder.order(manifests) {
        guard let i = byID[m.moduleID] else { continue }
        activate(slot: i, manifest: m)
      }
    case .isolated(let settings):
      // Each level at once: a module that hangs or misbehaves delays nobody beside it.
      for level in StartOrder.levels(manifests) {
        let items = level.compactMap { m in byID[m.moduleID].map { (slot: $0, manifest: m) } }
        activateIsolated(
          items.compactMap { prepareActivation(slot: $0.slot, manifest: $0.manifest) }, settings)
      }
    }
  }

  func fail(
    _ i: SlotHandle, _ step: GateStep, _ reason: ReasonCode, _ detail: String, crash: CrashReport? = nil
  ) {
    table[i].failed(step, reason, detail)
    environment.hostLog(
      .error, about: table[i].moduleID, "\(reason.rawValue) at \(step.rawValue): \(detail)",
      crash?.fields ?? [:], reason: reason)
  }

  /// Loads and starts one gated module. `copy` loads from an already made version copy (hot
  /// reload's rollback); `state` is handed to the new instance after its start.
  func activate(slot i: SlotHandle, manifest m: ModuleManifest, copy: String? = nil, state: [UInt8]? = nil) {
    guard let a = prepareActivation(slot: i, manifest: m, copy: copy, state: state) else { return }
    switch mode {
    case .inProcess:
      activateInProcess(slot: i, manifest: m, path: a.path, isSwift: a.isSwift, state: state)
    case .isolated(let settings): activateIsolated([a], settings)
    }
  }

  /// Where module `i` is loaded from (its binary, or a version copy of it), or nil after
  /// recording why it cannot be.
  func prepareActivation(
    slot i: SlotHandle, manifest m: ModuleManifest, copy: String? = nil, state: [UInt8]? = nil
  )
    -> Activation?
  {
    var path: String
    var isSwift: Bool
    var binary: String?
    if let copy {
      path = copy
      isSwift = table[i].record.loadedIsSwift
    } else {
      guard case .success(let facts) = index.locate(entryPoint: m.entryPoint) else {
        fail(i, .load, .binaryNotFound, "the binary exporting \(m.entryPoint) is gone since inspection")
        return nil
      }
      binary = facts.path
      if let why = quarantined(m.moduleID, path: facts.path) {
        table[i].loading(from: facts.path, isSwift: false, binary: facts.path)
        fail(i, .load, .quarantined, why)
        return nil
      }
      path = facts.path
      isSwift = facts.neededLibraries.contains { $0.hasPrefix("libswiftCore") }
      if versionCopies {
        guard let c = versionCopy(path, moduleID: m.moduleID, slot: i, facts: facts) else { return nil }
        path = c
      }
    }
    table[i].loading(from: path, isSwift: isSwift, binary: binary)
    return Activation(slot: i, manifest: m, path: path, isSwift: isSwift, state: state)
  }

  /// The copy module `i` loads `path` from: in memory when it loads into this process (a disk
  /// copy when memory cannot hold one), else on disk; nil after recording why there is none.
  private func versionCopy(_ path: String, moduleID: String, slot i: SlotHandle, facts: ELFFacts) -> String? {
    // A memory copy's $ORIGIN is /proc/self/fd: a binary that finds libraries through it gets
    // a disk copy beside links to them.
    if case .inProcess = mode, !VersionCopies.usesOrigin(facts),
      case .success(let c) = VersionCopies.inMemory(path, moduleID: moduleID)
    {
      return c
    }
    switch VersionCopies.copy(
      path, moduleID: moduleID, stateDirectory: environment.stateDirectory, facts: facts)
    {
    case .failure(let e):
      fail(i, .load, .loadFailed, "could not copy \(path) for loading: \(e)")
      return nil
    case .success(let c): return c
    }
  }

  /// Step 8's verdict, without recording it (a worker's start is decided before it is recorded).
  static func identityAndUI(_ m: ModuleManifest, _ d: ModuleDescriptor, _ ui: UIContributions?)
    -> IdentityVerdict
  {
    if case .fail(let v) = IdentityRules.check(m, d) { return .fail(v) }
    let c = ui ?? UIContributions()
    if case .fail(let v) = UIContributionRules.check(m, c) { return .fail(v) }
    return .pass(
      "descriptor agrees (\(m.moduleID) \(m.moduleType.rawValue) \(m.moduleVersion)); \(Self.describe(c))")
  }

  /// Records step 8's verdict on module `i`; whether it passed.
  @discardableResult
  func record(_ i: SlotHandle, _ verdict: IdentityVerdict) -> Bool {
    switch verdict {
    case .fail(let v):
      fail(i, .identityAndUI, v.reason, v.detail)
      return false
    case .pass(let detail):
      table[i].passed(.identityAndUI, detail)
      return true
    }
  }

  /// Records a start: the slot holds the instance from now on.
  func markStarted(
    _ i: SlotHandle, _ m: ModuleManifest, _ instance: any ModuleInstance, _ ui: UIContributions?,
    took: Duration,
    detail: String
  ) {
    starts += 1
    table[i].started(instance, sequence: starts, ui: ui, took: took, detail: detail)
    environment.hostLog(.info, "started \(m.moduleID) \(m.moduleVersion)", subject: m.moduleID)
  }

  static func formatted(_ d: Duration) -> String { DurationText.short(d) }

  private func activateInProcess(
    slot i: SlotHandle, manifest m: ModuleManifest, path: String, isSwift: Bool, state: [UInt8]?
  ) {
    let loaded: LoadedModule
    switch loader.load(path: path, entryPoint: m.entryPoint, isSwift: isSwift) {
    case .failure(let e):
      fail(i, .load, e.reason, e.description)
      return
    case .success(let l): loaded = l
    }
    table[i].passed(
      .load,
      "loaded \(Self.describeSource(path, binary: table[i].record.binaryPath)) in-process (module ABI \(ABIVersion.describe(loaded.table.pointee.abi_version))\(isSwift ? ", Swift image kept mapped" : ""))"
    )
    let ui: UIContributions?
    switch ModuleTableReader.uiContributions(loaded) {
    case .failure(let e):
      fail(i, .identityAndUI, e.reason, e.description)
      return
    case .success(let c): ui = c
    }
    guard record(i, Self.identityAndUI(m, loaded.descriptor, ui)) else { return }

    let binding: ModuleBinding
    do {
      binding = try ModuleBinding(
        moduleID: m.moduleID, granted: table[i].record.granted, serves: m.defaultModuleRole,
        calls: StartOrder.consumedRoles(m), environment: environment)
    } catch {
      fail(i, .start, .startFailed, "could not prepare the module's context: \(error)")
      return
    }
    let clock = ContinuousClock()
    let began = clock.now
    let status =
      loaded.table.pointee.start?(loaded.table.pointee.`self`, binding.hostTable) ?? FORSETTI_ERR_START_FAILED
    let took = clock.now - began
    guard status == FORSETTI_OK else {
      binding.revoke()
      fail(i, .start, .startFailed, "start returned \(StatusName.of(status))")
      return
    }
    if let state, !state.isEmpty { StateTransfer.restore(loaded.table, state) }
    let instance = InProcessInstance(moduleID: m.moduleID, loaded: loaded, binding: binding)
    markStarted(i, m, instance, ui, took: took, detail: "started in-process in \(Self.formatted(took))")
  }

  /// `path`, or for a memory copy the binary it was copied from.
  static func describeSource(_ path: String, binary: String?) -> String {
    guard path.hasPrefix("/proc/self/fd/"), let binary else { return path }
    return "\(binary) (its sealed memory copy \(path))"
  }

  static func describe(_ c: UIContributions) -> String {
    if c.isEmpty { return "no UI contributions" }
    var parts: [String] = []
    if !c.toolbarItems.isEmpty { parts.append("\(c.toolbarItems.count) toolbar item(s)") }
    if !c.viewInjections.isEmpty { parts.append("\(c.viewInjections.count) view injection(s)") }
    if let o = c.overlay { parts.append("\(o.routes.count) route(s), \(o.pointers.count) pointer(s)") }
    if let t = c.themeMask {
      parts.append("theme mask \(t.themeID) (validated; stripped before publication)")
    }
    return parts.joined(separator: ", ") + " accepted"
  }

  /// Stops every started module, consumers before the providers they depend on
  /// (`StartOrder`, reversed), revoking each one's host functions (in-process) or ending its
  /// worker (isolated).
  package func stopAll() {
    keepsSpareWorker = false
    for i in table.handles { table[i].forgetRestarts() }
    // A level at a time, consumers' levels first: every worker of a level is told at once and
    // then waited for, so a thousand independent modules stop in about one module's time.
    for level in stopLevels(table.running) {
      for i in level { table[i].instance?.requestStop() }
      for i in level { stop(i) }
    }
    workerSource?.release()
    persist()
  }

  /// `stopOrder(running)` cut into the levels of `StartOrder.levels`, the last level first:
  /// nothing in a level depends on another module of it.
  func stopLevels(_ running: [SlotHandle]) -> [[SlotHandle]] {
    let manifests = running.compactMap { table[$0].record.manifest }
    var level: [String: Int] = [:]
    for (n, l) in StartOrder.levels(manifests).enumerated() {
      for m in l { level[m.moduleID] = n }
    }
    var levels: [(level: Int, slots: [SlotHandle])] = []
    for i in stopOrder(running) {
      let n = table[i].record.moduleID.flatMap { level[$0] } ?? Int.max
      if let last = levels.indices.last, levels[last].level == n {
        levels[last].slots.append(i)
      } else {
        levels.append((n, [i]))
      }
    }
    return levels.map(\.slots)
  }

  /// `running` (in start order) in the order to stop it: the reverse of the dependency order,
  /// not of the order things happened to start in — a provider restarted after a crash started
  /// after its consumers, yet must still stop after them.
  func stopOrder(_ running: [SlotHandle]) -> [SlotHandle] {
    let manifests = running.compactMap { table[$0].record.manifest }
    var rank: [String: Int] = [:]
    for (n, m) in StartOrder.order(manifests).enumerated() { rank[m.moduleID] = n }
    return running.enumerated().sorted { a, b in
      let ra = table[a.element].record.moduleID.flatMap { rank[$0] } ?? Int.max
      let rb = table[b.element].record.moduleID.flatMap { rank[$0] } ?? Int.max
      return ra != rb ? ra > rb : a.offset > b.offset
    }.map(\.element)
  }

  /// Stops module `i` if it runs, recording how the stop went; whether it was running.
  @discardableResult
  func stop(_ i: SlotHandle) -> Bool {
    guard let instance = table[i].release(as: .stopped) else { return false }
    let id = instance.moduleID
    switch instance.stop() {
    case .stopped:
      environment.hostLog(.info, "stopped \(id)", subject: id)
    case .killedAfterTimeout(let t):
      environment.hostLog(.warning, about: id, "stop did not return within \(t) s; the worker was killed")
    case .crashed(let why):
      table[i].held(.failed(.crashed))
      environment.hostLog(.error, about: id, "crashed: \(why)")
    case .violated(let v):
      table[i].held(.failed(.protocolViolation))
      environment.hostLog(
        .error, about: id, "\(ReasonCode.protocolViolation.rawValue) during stop: \(v)",
        ["reason": ReasonCode.protocolViolation.rawValue])
    }
    return true
  }

  /// Writes `runtime.json` and `surface.json` so other invocations (`list`, `surface`) can see
  /// what this host is doing.
  func persist() {
    let state = RuntimeStateFile(pid: getpid(), records: records, surface: surface)
    let dir = environment.stateDirectory
    // Whole or absent (renamed into place), but not synced: these files describe a running host
    // (readers check its pid), so after a machine crash there is nothing in them to keep, and
    // two fsyncs cost more than starting a module. Written in the round that changed them, on
    // this thread: a host that dies after a reload leaves the file of the round before, never a
    // torn one.
    do {
      try stateFiles.publish(
        Array(JSONWriter.string(state.runtimeJSON, pretty: true).utf8), name: RuntimeStateFile.runtimeName,
        in: dir)
      try stateFiles.publish(
        Array(JSONWriter.string(state.surfaceJSON, pretty: true).utf8), name: RuntimeStateFile.surfaceName,
        in: dir)
    } catch {
      environment.hostLog(.warning, "could not save runtime state: \(error)")
    }
  }
}

/// A module about to be loaded and started: its record, and the file to load.
struct Activation {
  var slot: SlotHandle
  var manifest: ModuleManifest
  var path: String
  var isSwift: Bool
  /// Handed to the new instance after its start (hot reload).
  var state: [UInt8]?
}

/// Step 8's verdict: the trace detail of a pass, or what failed.
enum IdentityVerdict {
  case pass(String)
  case fail(GateViolation)

  init(_ result: Result<String, GateViolation>) {
    switch result {
    case .success(let detail): self = .pass(detail)
    case .failure(let v): self = .fail(v)
    }
  }

  /// The verdict as a `Result`, for code outside the lifecycle (`IsolatedStarter`).
  var result: Result<String, GateViolation> {
    switch self {
    case .pass(let detail): .success(detail)
    case .fail(let v): .failure(v)
    }
  }
}
