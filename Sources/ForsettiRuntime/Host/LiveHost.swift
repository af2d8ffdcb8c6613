import ForsettiBinary
import ForsettiBridge
import ForsettiCore
import FoundationEssentials
import Glibc
import Synchronization

/// A running host: it judges, converges on what should run, and converges again whenever
/// something that can change a verdict changes — a file of the state directory (approvals,
/// overrides, activation, licences, trusted keys) or the entitlements or policy file, a manifest or a
/// binary, a licence expiry or an override window's edge, a worker's exit. Only under `dev` does
/// a new version replace one that runs. It never stops by itself: with nothing to run it waits
/// for something to change.
///
/// Driven from one thread: `start`, then `process` each time `wake` (given at `init`) was called
/// or `nextDue` came, then `stop`.
package final class LiveHost {
  package let judge: Judge
  package let manager: ModuleManager
  /// Each reload of `dev`, as it happens.
  package var onReload: (ReloadReport) -> Void = { _ in }
  /// Each change a round made: a module whose state changed, then the UI surface if it did.
  package var onChange: (HostChange) -> Void = { _ in }
  private var lastStates: [String: ModuleState] = [:]
  private var lastSurface = Surface.compose([:])
  /// The policy problem last told in the log (`tellPolicyProblem`).
  private var toldPolicyProblem: String?
  /// The role-less trusted keys already warned of.
  private var warnedRoleless: Set<String> = []

  /// Hot reload: watch manifests and binaries, reload what changes.
  package typealias Development = DevelopmentSettings

  private let development: Development?
  /// How long file changes must settle before they count (`dev`'s setting, else 0.1 s).
  private var debounce: Double { development?.debounce ?? 0.1 }
  private let wake: @Sendable () -> Void
  private let trustChanged = ChangeFlag()
  /// A verdict file of the state directory was written: judged again only if its bytes are not
  /// those the last judgement read (`judgedState`).
  private let stateTouched = ChangeFlag()
  /// The verdict files as the last full judgement was about to read them.
  private var judgedState = JudgedStateFiles()
  private let files = PendingChanges()
  private var watchers: [FileWatcher] = []
  /// The directories delivered trust files are reached through (`DeliveredFiles.identities`),
  /// watched by their own watcher, made anew whenever a change of trust leads elsewhere.
  private var delivered: (directories: [String], watcher: FileWatcher?) = ([], nil)
  /// When a licence expires or an override window opens or closes next.
  private var nextEdge: ContinuousClock.Instant?
  /// The last full judgement and the in-memory overrides it was judged with: a round in which
  /// only binaries were rewritten judges again from it (`rejudged(binaries:)`).
  private var last: (verdicts: Judge.Verdicts, inMemory: InMemoryOverrides.Tables)?
  /// What the last full judgement's round read of the state directory besides the verdicts:
  /// the signature trust, the stored approvals (under `--approve-all`) and the activation
  /// state. Valid as long as `last` is: their files' change sets `trustChanged`, which judges
  /// everything again, so a round that only rejudges binaries reads none of them.
  private var stored = StoredInputs()

  private struct StoredInputs {
    var trust: Judge.SignatureTrust?
    var approvals: ApprovalLedger?
    var activation: ActivationState?
  }

  package init(
    judge: Judge, manager: ModuleManager, development: Development? = nil,
    wake: @escaping @Sendable () -> Void
  ) {
    self.judge = judge
    self.manager = manager
    self.development = development
    self.wake = wake
    manager.onSupervisionNeeded(wake)
  }

  /// The files whose change can change a verdict, in the state directory and beside it.
  package static let stateFiles: Set<String> = [
    "approvals.json", "overrides.json", "activation.json", "quarantine.json",
  ]

  /// Watches what it judges by (unless not `watching`), then judges and starts what should run.
  /// Watching begins first, so no change made meanwhile is missed. `discovered` sees the
  /// manifests of the first judgement before approvals are read; false from it ends the start
  /// there, nothing started.
  @discardableResult
  package func start(watching: Bool = true, discovered: ([ModuleManifest]) -> Bool = { _ in true })
    throws(JudgeError) -> Bool
  {
    try watch(installing: watching)
    warnRoleless()
    var proceed = true
    let verdicts = try judgeAll(discovered: { proceed = discovered($0) })
    guard proceed else { return false }
    schedule(verdicts.nextEdge)
    _ = try converge(verdicts, changed: [], since: .now, quiet: true)
    announce()
    return true
  }

  /// When the host next wants `process` without being woken (a restart, a time edge, a burst of
  /// file changes settling).
  package var nextDue: ContinuousClock.Instant? {
    [manager.nextRestart, nextEdge, files.due(after: debounce)].compactMap { $0 }
      .min()
  }

  /// Handles what happened since the last call: worker exits and due restarts, then, if a file
  /// or an instant may have changed a verdict, judges again and converges.
  package func process() {
    // Supervision's state files are written after the round (its own writes them too, unchanged
    // bytes are not written again): building them first cost a reload about a tenth of its time.
    manager.superviseOnce(persisting: false)
    var changed: Set<String> = []
    var since = ContinuousClock.now
    if let (paths, first) = files.take(after: debounce) {
      changed = paths
      since = first
    }
    let edge = nextEdge.map { ContinuousClock.now >= $0 } ?? false
    var trust = trustChanged.take()
    if stateTouched.take() {
      // Whatever the bytes, a state file renamed or relinked may now be reached through
      // another directory: watched anew (nothing is done when it is the same).
      watchDelivered()
      trust =
        trust
        || JudgedStateFiles.read(judge.configuration.stateDirectory, names: Self.stateFiles) != judgedState
    }
    defer {
      manager.persist()
      announce()
    }
    guard trust || edge || !changed.isEmpty else { return }
    if edge { nextEdge = nil }
    if trust {
      // Before judging: a change made after this is seen by the new watch, one made before by
      // the judgement, which reads after it.
      watchDelivered()
      warnRoleless()
    }
    if !trust && !edge, let verdicts = rejudged(binaries: changed) {
      converge(verdicts, changed: changed, since: since)
    } else {
      reconcile(changed: changed, since: since)
    }
  }

  /// Warns once of each key directly in `STATE/trusted-keys/`: trusted for nothing, which an
  /// operator who copied it there meant otherwise.
  private func warnRoleless() {
    let state = judge.configuration.stateDirectory
    let found = Set(TrustedKeys.roleless(stateDirectory: state))
    for path in found.subtracting(warnedRoleless).sorted() {
      manager.environment.hostLog(.warning, TrustedKeys.rolelessWarning(path, stateDirectory: state))
    }
    warnedRoleless = found
  }

  /// Judges everything, and keeps the verdicts for the rounds after (none after a failure: a
  /// round that could not judge changes nothing, and neither may the rounds after it until one
  /// can).
  private func judgeAll(discovered: ([ModuleManifest]) -> Void = { _ in }) throws(JudgeError)
    -> Judge.Verdicts
  {
    last = nil
    stored = StoredInputs()
    let snapshot = judge.configuration.inMemoryOverrides.snapshot
    // Kept only once judged: after a failure any write is judged again, whatever its bytes.
    judgedState = JudgedStateFiles()
    let files = JudgedStateFiles.read(judge.configuration.stateDirectory, names: Self.stateFiles)
    let judgingStart = HostMetrics.now()
    let verdicts = try judge.judge(laterSteps: nil, applyReductions: true, discovered: discovered)
    manager.environment.metrics.judgings.record(nanoseconds: HostMetrics.now() &- judgingStart)
    last = (verdicts, snapshot)
    judgedState = files
    return verdicts
  }

  /// The last verdicts judged again with only the binaries in `paths` inspected anew, or nil
  /// when a full judgement is needed. Valid when every changed file is a binary judged last
  /// time and still a file: the manifests are as they were read (a manifest's change is in
  /// `paths`), and so are the state files, licences, keys and entitlements (their change sets
  /// `trustChanged`, a time edge comes as `edge`, an in-memory override is compared here).
  /// Every manifest still goes through the gate stack, with the rewritten binaries' facts.
  private func rejudged(binaries paths: Set<String>) -> Judge.Verdicts? {
    guard let previous = last, var index = previous.verdicts.index, !paths.isEmpty else { return nil }
    var v = previous.verdicts
    let inMemory = previous.inMemory
    let now = judge.configuration.inMemoryOverrides.snapshot
    guard now.modules == inMemory.modules, now.products == inMemory.products else { return nil }
    for path in paths {
      var st = stat()
      guard index.files[path] != nil, stat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return nil }
      index.add(path)
    }
    v.index = index
    v.binaryFailures = index.failures
    v.context.now = GateContext.wallClock()
    let trust = stored.trust ?? judge.signatureTrust
    stored.trust = trust
    let step = judge.inspect(index, trust: trust)
    v.judgements = GateStack.judge(v.report, context: v.context, inspect: step, laterSteps: nil)
    last = (v, inMemory)
    return v
  }

  /// Converges on `verdicts`, reporting each reload; a failure to read the activation state
  /// changes nothing and is reported.
  private func converge(_ verdicts: Judge.Verdicts, changed: Set<String>, since: ContinuousClock.Instant) {
    do throws(JudgeError) {
      for r in try converge(verdicts, changed: changed, since: since, quiet: false) { onReload(r) }
    } catch {
      judgedState = JudgedStateFiles()
      manager.environment.hostLog(.warning, "not reconciled: \(error); the modules keep running as they are")
    }
  }

  /// Says once in the host's log when the policy file stops reading as valid (the last valid one
  /// stays in force: `PolicyMemory`), and once when it reads again.
  private func tellPolicyProblem() {
    let now = judge.configuration.policyMemory?.problem
    guard now != toldPolicyProblem else { return }
    toldPolicyProblem = now
    if let now {
      manager.environment.hostLog(.warning, "policy: \(now)")
    } else {
      manager.environment.hostLog(.info, "policy: the policy file reads as valid again; it is in force")
    }
  }

  /// Tells `onChange` what changed since it was last told.
  private func announce() {
    for r in manager.records {
      let key = r.moduleID ?? r.file
      guard lastStates[key] != r.state else { continue }
      lastStates[key] = r.state
      onChange(.module(r))
    }
    let surface = manager.surface
    if surface != lastSurface {
      lastSurface = surface
      onChange(.surface(surface))
    }
  }

  /// Judges everything again and converges; a judging failure (a malformed approvals.json, say)
  /// changes nothing and is reported.
  package func reconcile(changed: Set<String> = [], since: ContinuousClock.Instant = .now) {
    defer { announce() }
    do throws(JudgeError) {
      let verdicts = try judgeAll()
      tellPolicyProblem()
      schedule(verdicts.nextEdge)
      converge(verdicts, changed: changed, since: since)
    } catch {
      manager.environment.hostLog(.warning, "not reconciled: \(error); the modules keep running as they are")
    }
  }

  /// Reloads module `id` now, from its files as they are (an operator's `reload ID`): the same
  /// transitions as a reload under `dev`, whatever changed. nil when no manifest declares `id`.
  package func reload(_ id: String) throws(JudgeError) -> [ReloadReport]? {
    defer { announce() }
    let verdicts = try judgeAll()
    guard let j = verdicts.judgements.first(where: { $0.moduleID == id }) else { return nil }
    return manager.reloadNow(j, try desired(verdicts), grace: development?.grace ?? 0.5)
  }

  /// Rounds of reconciliation on one set of verdicts: another round only when a UI module failed
  /// to start in the last one (the automatic choice then passes it over), at most three.
  private func converge(
    _ verdicts: Judge.Verdicts, changed: Set<String>, since: ContinuousClock.Instant, quiet: Bool
  ) throws(JudgeError) -> [ReloadReport] {
    var reports: [ReloadReport] = []
    var changed = changed
    for _ in 0..<3 {
      let failedBefore = Set(failedVersions(verdicts))
      reports += manager.reconcile(
        try desired(verdicts), changed: changed, reloadsVersions: development != nil,
        grace: development?.grace ?? 0, since: since, quiet: quiet)
      changed = []
      let visual = Set(
        verdicts.judgements.filter { $0.manifest?.moduleType.isVisual == true }.compactMap(\.moduleID))
      guard !Set(failedVersions(verdicts)).subtracting(failedBefore).isDisjoint(with: visual) else { break }
    }
    return reports
  }

  /// Stops every module, last started first, and the watching.
  package func stop() {
    for w in watchers { w.stop() }
    watchers.removeAll()
    delivered.watcher?.stop()
    delivered = ([], nil)
    manager.stopAll()
  }

  private func desired(_ v: Judge.Verdicts) throws(JudgeError) -> DesiredState {
    // What the user approved: the judge read it already, unless --approve-all stood in for it
    // (an update still needs what is stored).
    var approvals = v.context.approvals
    if judge.configuration.approveAll {
      if let known = stored.approvals { approvals = known } else { approvals = try judge.storedApprovals() }
      stored.approvals = approvals
    }
    approvals.approveAll = judge.configuration.approveAll
    let activation: ActivationState
    if let known = stored.activation {
      activation = known
    } else {
      activation = try ActivationPlan.stored(judge.configuration)
      stored.activation = activation
    }
    return DesiredState(
      judgements: v.judgements, index: v.index ?? BinaryIndex(),
      inactive: try ActivationPlan.inactive(
        v, judge.configuration, stored: activation, failed: Set(failedVersions(v)),
        running: Set(manager.records.filter { $0.state == .started }.compactMap(\.moduleID))),
      approvals: approvals, context: v.context)
  }

  /// Modules whose judged version is the one that failed to load or start.
  private func failedVersions(_ v: Judge.Verdicts) -> [String] {
    let judged = Dictionary(v.judgements.compactMap { j in j.moduleID.map { ($0, j.manifest) } }) { a, _ in a
    }
    return manager.records.compactMap { r in
      guard let id = r.moduleID, r.state.isFailure, let m = judged[id], m == r.manifest else { return nil }
      return id
    }
  }

  private func schedule(_ edge: Instant?) {
    let now = GateContext.wallClock()
    nextEdge = edge.map { ContinuousClock.now + .wait(max(0, $0 - now)) + .milliseconds(1) }
  }

  /// Makes the directories of what the host judges by and, when `installing`, watches them.
  private func watch(installing: Bool) throws(JudgeError) {
    let c = judge.configuration
    let state = c.stateDirectory.isEmpty ? "." : c.stateDirectory
    let keys = TrustedKeys.root(stateDirectory: state)
    let roleDirs = TrustRole.allCases.map { TrustedKeys.directory($0, stateDirectory: state) }
    var dirs = [state, state + "/licences", keys] + roleDirs
    let inputFiles = [c.entitlementsFile, c.policyFile].compactMap { $0 }
    let inputNames = Set(inputFiles.map { PathText.name($0) })
    // Any change in the entitlements or policy file's own directory counts (a file swapped
    // through a symbolic link, as Kubernetes mounts do); in the state directory only its name
    // does, or the host's own writes there (runtime.json) would wake it.
    var inputDirectories = Set<String>()
    for file in inputFiles {
      let dir = PathText.parent(file)
      let d = dir.isEmpty ? "." : dir
      dirs.append(d)
      if d != state { inputDirectories.insert(d) }
    }
    for d in dirs {
      try? FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
    }
    guard installing else {
      // Refused as a watch would refuse it.
      for d in [c.manifestsDirectory] + c.pluginDirectories {
        var st = stat()
        if stat(d, &st) != 0 { throw unwatchable(d, errno) }
        if (st.st_mode & S_IFMT) != S_IFDIR { throw unwatchable(d, ENOTDIR) }
      }
      return
    }
    let inputDirs = inputDirectories
    let flag = trustChanged
    let touched = stateTouched
    let wake = self.wake
    let names = Self.stateFiles
    do {
      watchers.append(
        try FileWatcher(directories: Array(Set(dirs)), recursive: false) { path, _ in
          let name = PathText.name(path)
          let dir = PathText.parent(path)
          if dir == state && names.contains(name) && !inputNames.contains(name) {
            touched.set()
            wake()
            return
          }
          let trust = dir == state && (name == "licences" || name == "trusted-keys")
          if names.contains(name) || inputNames.contains(name) || inputDirs.contains(dir) || trust
            || dir == state + "/licences" || dir == keys || roleDirs.contains(dir)
          {
            flag.set()
            wake()
          }
        })
    } catch {
      throw .file(setting: "state", path: state, reason: "cannot watch: \(error)")
    }
    // Watched under `run` too: a module installed, fixed or rebuilt out of quarantine starts;
    // only `dev` replaces a version that runs.
    let pending = files
    do {
      watchers.append(
        try FileWatcher(directories: [c.manifestsDirectory] + c.pluginDirectories) { path, at in
          pending.add(path, at: at)
          wake()
        })
    } catch {
      guard case .directory(let d, let e) = error else {
        throw .file(setting: "manifests", path: c.manifestsDirectory, reason: error.description)
      }
      throw unwatchable(d, e)
    }
    manager.environment.hostLog(
      .info, "watching \(([c.manifestsDirectory] + c.pluginDirectories).joined(separator: ", ")) for changes")
    watchDelivered()
  }

  /// A manifests or plugin directory that cannot be watched (`e`), in the words an operator
  /// acts on (`no such directory`).
  private func unwatchable(_ d: String, _ e: Int32) -> JudgeError {
    let c = judge.configuration
    return .file(
      setting: d == c.manifestsDirectory ? "manifests" : "plugins", path: d,
      reason: e == ENOENT ? "no such directory" : "cannot watch it: \(String(cString: strerror(e)))")
  }

  /// The trust inputs that may be delivered through symbolic links: the state files, the
  /// licences and keys directories, the entitlements and policy files.
  private var trustPaths: [String] {
    let c = judge.configuration
    let state = c.stateDirectory.isEmpty ? "." : c.stateDirectory
    return Self.stateFiles.sorted().map { PathText.join(state, $0) } + [
      PathText.join(state, "licences"), TrustedKeys.root(stateDirectory: state),
    ] + TrustRole.allCases.map { TrustedKeys.directory($0, stateDirectory: state) }
      + [c.entitlementsFile, c.policyFile].compactMap { $0 }
  }

  /// Watches the directories the delivered trust files are reached through, anew when they are
  /// no longer those watched: any change in one counts (a `..data` link renamed over, a file
  /// renamed into place). The state directory is left to its own watcher, which counts only
  /// the trust files' names there: the host itself writes runtime.json beside them.
  private func watchDelivered() {
    let state = judge.configuration.stateDirectory
    let own = realpath(state.isEmpty ? "." : state, nil).map { p in
      defer { free(p) }
      return String(cString: p)
    }
    // A directory can vanish between resolving and watching (a kubelet removing the old
    // `..TIMESTAMP`): resolve again, a few times, before giving up.
    var failure: FileWatcher.WatchError?
    for _ in 0..<3 {
      var seen = Set<String>()
      let dirs = trustPaths.flatMap(DeliveredFiles.directories(of:)).filter {
        $0 != own && seen.insert($0).inserted
      }
      let identities = DeliveredFiles.identities(dirs)
      guard identities != delivered.directories || failure != nil else { return }
      delivered.watcher?.stop()
      delivered = (identities, nil)
      guard !dirs.isEmpty else { return }
      let flag = trustChanged
      let wake = self.wake
      do {
        delivered.watcher = try FileWatcher(directories: dirs, recursive: false) { _, _ in
          flag.set()
          wake()
        }
        manager.environment.hostLog(
          .info, "watching delivered trust files in \(dirs.joined(separator: ", "))")
        return
      } catch {
        failure = error
      }
    }
    if let failure {
      // Watched again at the next change of trust the state directory's watcher sees.
      delivered = ([], nil)
      manager.environment.hostLog(.warning, "delivered trust files are not watched: \(failure)")
    }
  }
}

/// Set by a watcher thread, taken by the host's loop.
final class ChangeFlag: Sendable {
  private let value = Mutex(false)
  func set() { value.withLock { $0 = true } }
  func take() -> Bool {
    value.withLock { v in
      defer { v = false }; return v
    }
  }
}
