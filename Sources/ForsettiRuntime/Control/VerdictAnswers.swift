import ForsettiBinary
import ForsettiCore

/// The `list` and `explain` answers: each module's verdict from the view's judge (a running
/// host's own, so its in-memory overrides decide as they do for it), with the whole gate trace,
/// the override that decided its entitlement when one did, its run state and reported health.
/// The command line prints these documents for `--json` and renders its text from them.
package enum VerdictAnswers {
  /// `list`: every module.
  package static func list(_ view: ControlView) throws(ControlFailure) -> ListAnswer {
    let v = try verdicts(view, laterSteps: "list does not load modules")
    var answer = ListAnswer(
      modules: v.judgements.map { verdict($0, v.context, view) },
      host: view.run.map { RunHost(pid: $0.pid, running: $0.alive) }, inMemoryKnown: view.inMemoryKnown,
      healthKnown: view.health != nil)
    answer.problems = problems(view)
    return answer
  }

  /// What the view's judge judged with that is not the files as they are (`PolicyMemory`).
  static func problems(_ view: ControlView) -> [String] {
    [view.judge.configuration.policyMemory?.problem].compactMap { $0 }
  }

  /// `explain`: one module, by ID or manifest file name.
  package static func explain(_ view: ControlView, module wanted: String) throws(ControlFailure)
    -> ExplainAnswer
  {
    let v = try verdicts(view, laterSteps: "explain does not load modules")
    guard
      let j = v.judgements.first(where: { $0.moduleID == wanted })
        ?? v.judgements.first(where: { $0.file == wanted })
    else {
      throw .noModule(
        wanted, among: v.judgements.compactMap(\.moduleID),
        manifests: view.judge.configuration.manifestsDirectory)
    }
    let trust = TrustReport.make(j.manifest, context: v.context, judge: view.judge)
    let head = verdict(j, v.context, view)
    var answer = ExplainAnswer(
      verdict: head,
      runFrom: head.runState == nil ? nil : view.run.map { RunHost(pid: $0.pid, running: $0.alive).label },
      isolation: IsolationSettings.kernelSupport(), inMemoryKnown: view.inMemoryKnown,
      healthKnown: view.health != nil, entitlement: trust?.entitlementJSON ?? .null,
      approval: trust?.approvalJSON ?? .null, licences: trust?.licences ?? [],
      signatures: SignatureStepReport.make(j.manifest, index: v.index, judge: view.judge).json,
      libraries: LibraryGrantReport.make(j.manifest, index: v.index, stateDirectory: view.stateDirectory)?
        .json
        ?? .null,
      serving: j.moduleID.flatMap { view.serving[$0] } ?? .null)
    answer.problems = problems(view)
    answer.lastCrash =
      j.moduleID.flatMap { CrashStore(stateDirectory: view.stateDirectory).latest($0)?.json } ?? .null
    return answer
  }

  /// One module's verdict: the judgement, the deciding override, its run state and report.
  static func verdict(_ j: ModuleJudgement, _ context: GateContext, _ view: ControlView) -> ModuleVerdict {
    let runState = j.moduleID.flatMap { view.run?.states[$0] }
    var verdict = ModuleVerdict(
      moduleID: j.moduleID, file: j.file, displayName: j.manifest?.displayName,
      version: j.manifest?.moduleVersion.description, type: j.manifest?.moduleType.rawValue, passed: j.passed,
      reason: j.reason?.rawValue, override: deciding(j.manifest, context), runState: runState?.state,
      runReason: runState?.reason, health: HealthJSON.of(j.moduleID, in: view.health),
      trace: j.trace.entries.map(TraceStep.init))
    // The host keeps what it loaded until a reload: say so when the files hold another version.
    let running = j.moduleID.flatMap { view.run?.versions[$0] }
    if let running, running != verdict.version { verdict.runningVersion = running }
    if let id = j.moduleID, let crash = CrashStore(stateDirectory: view.stateDirectory).latest(id) {
      verdict.lastCrash = crash.summary
      verdict.lastCrashTime = crash.time
    }
    return verdict
  }

  /// The override that decided a module's entitlement (its channel, provider and state), or
  /// null when none did: a running host's in-memory override shows here as the deciding input.
  static func deciding(_ m: ModuleManifest?, _ context: GateContext) -> DecidingOverride? {
    guard let m else { return nil }
    let e = context.entitlement(m)
    switch e.decidedBy {
    case .moduleOverride(let p, let s):
      return DecidingOverride(channel: "module", provider: p, state: s.rawValue, summary: e.summary)
    case .productOverride(let p, let s):
      return DecidingOverride(channel: "product", provider: p, state: s.rawValue, summary: e.summary)
    case .free, .provider: return nil
    }
  }

  private static func verdicts(_ view: ControlView, laterSteps: String) throws(ControlFailure)
    -> Judge.Verdicts
  {
    do { return try view.judge.judge(laterSteps: laterSteps) } catch { throw .judging(error) }
  }
}
