import ForsettiBinary
import ForsettiCore

/// The `list` and `explain` answers: each module's verdict from the view's judge (a running
/// host's own, so its in-memory overrides decide as they do for it), with the whole gate trace,
/// the override that decided its entitlement when one did, its run state and reported health.
/// The command line prints these documents for `--json` and renders its text from them.
public enum VerdictAnswers {
  /// `list`: every module.
  public static func list(_ view: ControlView) throws(ControlFailure) -> JSONValue {
    let v = try verdicts(view, laterSteps: "list does not load modules")
    var modules: [JSONValue] = []
    for j in v.judgements {
      let runState = j.moduleID.flatMap { view.run?.states[$0] }
      modules.append(
        .object(
          JSONObject([
            ("moduleID", .string(orNull: j.moduleID)), ("file", .string(j.file)),
            ("displayName", .string(orNull: j.manifest?.displayName)),
            ("version", .string(orNull: j.manifest?.moduleVersion.description)),
            ("type", .string(orNull: j.manifest?.moduleType.rawValue)),
            ("verdict", .string(j.passed ? "pass" : "blocked")),
            ("reason", .string(orNull: j.reason?.rawValue)),
            ("override", deciding(j.manifest, v.context)),
            ("runState", .string(orNull: runState?.state)),
            ("runReason", .string(orNull: runState?.reason)),
            ("health", HealthJSON.of(j.moduleID, in: view.health)),
            ("trace", .array(j.trace.entries.map(TraceJSON.entry))),
          ])))
    }
    var root = JSONObject([("modules", .array(modules))])
    root["host"] = view.run?.json ?? .null
    root["inMemoryKnown"] = .bool(view.inMemoryKnown)
    HealthJSON.annotate(&root, known: view.health != nil)
    return .object(root)
  }

  /// `explain`: one module, by ID or manifest file name.
  public static func explain(_ view: ControlView, module wanted: String) throws(ControlFailure) -> JSONValue {
    let v = try verdicts(view, laterSteps: "explain does not load modules")
    guard
      let j = v.judgements.first(where: { $0.moduleID == wanted })
        ?? v.judgements.first(where: { $0.file == wanted })
    else {
      throw .noModule(
        wanted, among: v.judgements.compactMap(\.moduleID),
        manifests: view.judge.configuration.manifestsDirectory)
    }
    let runState = j.moduleID.flatMap { view.run?.states[$0] }
    let trust = TrustReport.make(j.manifest, context: v.context, judge: view.judge)
    let signatures = SignatureStepReport.make(j.manifest, index: v.index, judge: view.judge)
    let libraries = LibraryGrantReport.make(j.manifest, index: v.index, stateDirectory: view.stateDirectory)
    guard case .object(var o) = TraceJSON.judgement(j) else { return .null }
    o["override"] = deciding(j.manifest, v.context)
    o["entitlement"] = trust?.entitlementJSON ?? .null
    o["approval"] = trust?.approvalJSON ?? .null
    o["licences"] = .strings(trust?.licences ?? [])
    o["signatures"] = signatures.json
    o["runState"] = .string(orNull: runState?.state)
    o["runReason"] = .string(orNull: runState?.reason)
    o["runFrom"] = .string(
      orNull: runState == nil ? nil : view.run.map { RunStates.label(pid: $0.pid, running: $0.alive) })
    o["isolation"] = .string(IsolationSettings.kernelSupport())
    o["libraries"] = libraries?.json ?? .null
    o["health"] = HealthJSON.of(j.moduleID, in: view.health)
    o["inMemoryKnown"] = .bool(view.inMemoryKnown)
    HealthJSON.annotate(&o, known: view.health != nil)
    return .object(o)
  }

  /// The override that decided a module's entitlement (its channel, provider and state), or
  /// null when none did: a running host's in-memory override shows here as the deciding input.
  static func deciding(_ m: ModuleManifest?, _ context: GateContext) -> JSONValue {
    guard let m else { return .null }
    let e = context.entitlement(m)
    let (channel, provider, state): (String, String, OverrideState)
    switch e.decidedBy {
    case .moduleOverride(let p, let s): (channel, provider, state) = ("module", p, s)
    case .productOverride(let p, let s): (channel, provider, state) = ("product", p, s)
    case .free, .provider: return .null
    }
    return .object(
      JSONObject([
        ("channel", .string(channel)), ("provider", .string(provider)), ("state", .string(state.rawValue)),
        ("summary", .string(e.summary)),
      ]))
  }

  private static func verdicts(_ view: ControlView, laterSteps: String) throws(ControlFailure)
    -> Judge.Verdicts
  {
    do { return try view.judge.judge(laterSteps: laterSteps) } catch { throw .judging(error) }
  }
}
