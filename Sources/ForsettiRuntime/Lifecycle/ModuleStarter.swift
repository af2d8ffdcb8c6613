import CForsetti
import ForsettiBinary
import ForsettiBridge
import ForsettiCore

/// Loads and starts gated modules into their slots: load → identity and UI → start, providers
/// first. In-process here, one by one on the main thread as forsetti.h promises; isolated, a
/// dependency level at a time through `IsolatedActivation`. One module's failure is recorded
/// against it and never stops others.
///
/// Used from the host's main thread only.
final class ModuleStarter {
  private let table: ModuleTable
  private let environment: HostEnvironment
  private let loader: any ModuleLoading
  private let quarantine: QuarantineStore
  private let recorder: StartRecorder
  /// The isolated start; nil when modules load into this process.
  private let isolated: IsolatedActivation?
  /// The binaries last judged, where each module's entry point is looked up at its load.
  var index = BinaryIndex()
  /// Load every binary from a content-named copy under `STATE/versions/` (hot reload needs the
  /// old version after the file is replaced, and a fresh path so the loader maps the new one).
  var versionCopies = false

  init(
    table: ModuleTable, environment: HostEnvironment, loader: any ModuleLoading, quarantine: QuarantineStore,
    isolated: IsolatedActivation?
  ) {
    self.table = table
    self.environment = environment
    self.loader = loader
    self.quarantine = quarantine
    self.isolated = isolated
    recorder = StartRecorder(table: table, environment: environment)
  }

  /// Loads and starts the gated modules of `slots`, providers first.
  func start(_ slots: [SlotHandle]) {
    let byID = Dictionary(slots.compactMap { i in table[i].moduleID.map { ($0, i) } }) { a, _ in a }
    let manifests = slots.compactMap { table[$0].manifest }
    guard let isolated else {
      // On the main thread one by one, as forsetti.h promises.
      for m in StartOrder.order(manifests) {
        guard let i = byID[m.moduleID] else { continue }
        activate(slot: i, manifest: m)
      }
      return
    }
    // Each level at once: a module that hangs or misbehaves delays nobody beside it.
    for level in StartOrder.levels(manifests) {
      let items = level.compactMap { m in byID[m.moduleID].map { (slot: $0, manifest: m) } }
      let made = diskCopies(of: items.map(\.manifest))
      isolated.run(
        items.compactMap { prepare(slot: $0.slot, manifest: $0.manifest, made: made[$0.manifest.moduleID]) })
    }
  }

  /// The version copies of a level's modules, made on every core at once: reading, hashing and
  /// writing each binary was the larger part of the main thread's work in a first start of
  /// 1,000 modules (`scripts/bench --only scale`). Empty without version copies.
  private func diskCopies(of manifests: [ModuleManifest]) -> [String: Result<String, AtomicFile.WriteError>] {
    guard versionCopies, manifests.count > 1 else { return [:] }
    let found = manifests.compactMap { m -> (String, ELFFacts)? in
      guard case .success(let facts) = index.locate(entryPoint: m.entryPoint) else { return nil }
      return (m.moduleID, facts)
    }
    let state = environment.stateDirectory
    let copies = ParallelMap.map(found.count, minimumPerWorker: 8) { k in
      VersionCopies.copy(found[k].1.path, moduleID: found[k].0, stateDirectory: state, facts: found[k].1)
    }
    return Dictionary(zip(found.map(\.0), copies)) { a, _ in a }
  }

  /// Loads and starts one gated module. `copy` loads from an already made version copy (hot
  /// reload's rollback); `state` is handed to the new instance after its start.
  func activate(slot i: SlotHandle, manifest m: ModuleManifest, copy: String? = nil, state: [UInt8]? = nil) {
    guard let a = prepare(slot: i, manifest: m, copy: copy, state: state) else { return }
    if let isolated {
      isolated.run([a])
    } else {
      activateInProcess(slot: i, manifest: m, path: a.path, isSwift: a.isSwift, state: state)
    }
  }

  /// What a start of `m` would load in a worker now — its binary, and the file loaded (the
  /// content-named version copy, made if missing) — or nil when that cannot be said: a worker
  /// an image of the host before this one handed over is kept only if it loaded the same.
  func workerLoad(of m: ModuleManifest) -> (binary: String, path: String)? {
    guard case .success(let facts) = index.locate(entryPoint: m.entryPoint) else { return nil }
    guard versionCopies else { return (facts.path, facts.path) }
    guard
      case .success(let c) = VersionCopies.copy(
        facts.path, moduleID: m.moduleID, stateDirectory: environment.stateDirectory, facts: facts)
    else { return nil }
    return (facts.path, c)
  }

  /// The binary `j`'s entry point is exported by, in the current index.
  func binaryPath(of j: ModuleJudgement) -> String? {
    j.manifest.flatMap { m in try? index.locate(entryPoint: m.entryPoint).get().path }
  }

  /// Where module `i` is loaded from (its binary, or a version copy of it), or nil after
  /// recording why it cannot be.
  private func prepare(
    slot i: SlotHandle, manifest m: ModuleManifest, copy: String? = nil, state: [UInt8]? = nil,
    made: Result<String, AtomicFile.WriteError>? = nil
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
        recorder.fail(
          i, .load, .binaryNotFound, "the binary exporting \(m.entryPoint) is gone since inspection")
        return nil
      }
      binary = facts.path
      if let why = quarantine.refusal(of: m.moduleID, path: facts.path, environment: environment) {
        table[i].loading(from: facts.path, isSwift: false, binary: facts.path)
        recorder.fail(i, .load, .quarantined, why)
        return nil
      }
      path = facts.path
      isSwift = facts.neededLibraries.contains { $0.hasPrefix("libswiftCore") }
      if versionCopies {
        guard let c = versionCopy(path, moduleID: m.moduleID, slot: i, facts: facts, made: made) else {
          return nil
        }
        path = c
      }
    }
    table[i].loading(from: path, isSwift: isSwift, binary: binary)
    return Activation(slot: i, manifest: m, path: path, isSwift: isSwift, state: state)
  }

  /// The copy module `i` loads `path` from: in memory when it loads into this process (a disk
  /// copy when memory cannot hold one), else on disk; nil after recording why there is none.
  private func versionCopy(
    _ path: String, moduleID: String, slot i: SlotHandle, facts: ELFFacts,
    made: Result<String, AtomicFile.WriteError>? = nil
  ) -> String? {
    // A memory copy's $ORIGIN is /proc/self/fd: a binary that finds libraries through it gets
    // a disk copy beside links to them.
    if isolated == nil, !VersionCopies.usesOrigin(facts),
      case .success(let c) = VersionCopies.inMemory(path, moduleID: moduleID)
    {
      return c
    }
    // Made beforehand for its level (`diskCopies`) only from the same binary as now.
    let copied =
      made
      ?? VersionCopies.copy(
        path, moduleID: moduleID, stateDirectory: environment.stateDirectory, facts: facts)
    switch copied {
    case .failure(let e):
      recorder.fail(i, .load, .loadFailed, "could not copy \(path) for loading: \(e)")
      return nil
    case .success(let c): return c
    }
  }

  private func activateInProcess(
    slot i: SlotHandle, manifest m: ModuleManifest, path: String, isSwift: Bool, state: [UInt8]?
  ) {
    let loaded: LoadedModule
    switch loader.load(path: path, entryPoint: m.entryPoint, isSwift: isSwift) {
    case .failure(let e):
      recorder.fail(i, .load, e.reason, e.description)
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
      recorder.fail(i, .identityAndUI, e.reason, e.description)
      return
    case .success(let c): ui = c
    }
    guard recorder.record(i, IdentityVerdict(m, loaded.descriptor, ui)) else { return }

    let binding: ModuleBinding
    do {
      binding = try ModuleBinding(
        moduleID: m.moduleID, granted: table[i].record.granted, serves: m.defaultModuleRole,
        calls: StartOrder.consumedRoles(m), environment: environment)
    } catch {
      recorder.fail(i, .start, .startFailed, "could not prepare the module's context: \(error)")
      return
    }
    let clock = ContinuousClock()
    let began = clock.now
    let status =
      loaded.table.pointee.start?(loaded.table.pointee.`self`, binding.hostTable) ?? FORSETTI_ERR_START_FAILED
    let took = clock.now - began
    guard status == FORSETTI_OK else {
      binding.revoke()
      recorder.fail(i, .start, .startFailed, "start returned \(StatusName.of(status))")
      return
    }
    if let state, !state.isEmpty { StateTransfer.restore(loaded.table, state) }
    let instance = InProcessInstance(moduleID: m.moduleID, loaded: loaded, binding: binding)
    recorder.started(
      i, m, instance, ui, took: took, detail: "started in-process in \(DurationText.short(took))")
  }

  /// `path`, or for a memory copy the binary it was copied from.
  private static func describeSource(_ path: String, binary: String?) -> String {
    guard path.hasPrefix("/proc/self/fd/"), let binary else { return path }
    return "\(binary) (its sealed memory copy \(path))"
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
