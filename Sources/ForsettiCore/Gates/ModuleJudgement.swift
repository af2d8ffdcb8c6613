/// The gate stack's verdict on one discovered file, up to the point a caller evaluates.
public struct ModuleJudgement: Sendable, Hashable {
  /// The manifest file, relative to the manifest directory.
  public var file: String
  /// The declared module ID; nil when the file never got far enough to declare one.
  public var moduleID: String?
  /// The manifest, when discovery accepted it.
  public var manifest: ModuleManifest?
  public var trace: GateTrace
  /// What the module may use once it runs (approved and still requested); nil when it never
  /// reached the approval gate.
  public var granted: Set<Capability>? = nil

  /// A judgement as the gate stack records one (the runtime judges a loaded version again).
  public init(
    file: String, moduleID: String?, manifest: ModuleManifest?, trace: GateTrace,
    granted: Set<Capability>? = nil
  ) {
    self.file = file
    self.moduleID = moduleID
    self.manifest = manifest
    self.trace = trace
    self.granted = granted
  }

  /// Whether no step failed.
  public var passed: Bool { trace.passed }
  /// The first blocking reason code, or nil.
  public var reason: ReasonCode? { trace.firstFailure?.reason }
}

/// What the binary inspection step (2) reported for a manifest.
public enum BinaryInspectionStep: Sendable, Hashable {
  /// Not run, and why (e.g. no plugin directory was given).
  case skipped(String)
  case outcome(GateOutcome, passNote: GateNote)

  /// An outcome with a fixed pass line.
  public static func outcome(_ o: GateOutcome, passDetail: String) -> BinaryInspectionStep {
    .outcome(o, passNote: GateNote(passDetail))
  }
}

/// Runs the gate stack over a discovery report: discover, inspect binary, then steps 3–6.
public enum GateStack {
  /// One judgement per discovered file that is (or claims to be) a manifest; ignored files are
  /// left out. When `laterSteps` is given, the steps after `runtimeRequirements` of a passing
  /// module are recorded as skipped with that detail; otherwise they are left for the loader.
  public static func judge(
    _ report: DiscoveryReport, context: GateContext,
    inspect: @Sendable (ModuleManifest) -> BinaryInspectionStep, laterSteps: String?
  ) -> [ModuleJudgement] {
    // Modules are judged independently (in parallel when there are many), in file order. The
    // ignored files are left out before, not after: dropping the nils of a mapped array copied
    // every judgement (a manifest and a trace each) once more.
    let files = report.files
    let judged = files.indices.filter { i in
      if case .ignored = files[i].outcome { false } else { true }
    }
    let shared = SharedContext(context)
    return ParallelMap.map(judged.count) { n in
      judge(files[judged[n]], context: shared, inspect: inspect, laterSteps: laterSteps)
    }
  }

  /// One file's judgement; a file discovery ignored is judged as not a manifest.
  static func judge(
    _ file: DiscoveredFile, context: SharedContext,
    inspect: (ModuleManifest) -> BinaryInspectionStep, laterSteps: String?
  ) -> ModuleJudgement {
    var trace = GateTrace.forAllSteps()
    switch file.outcome {
    case .manifest(let m):
      trace.pass(
        .discover,
        .deferred { [id = m.moduleID, version = m.moduleVersion] in "manifest for \(id) \(version)" })
      switch inspect(m) {
      case .skipped(let why):
        trace.skip(.inspectBinary, why)
      case .outcome(let o, let passNote):
        trace.record(.inspectBinary, o, passNote: passNote)
        if let v = o.violation {
          trace.skipRemaining(because: "not evaluated: inspectBinary failed with \(v.reason.rawValue)")
          return .init(file: file.file, moduleID: m.moduleID, manifest: m, trace: trace)
        }
      }
      if GateEvaluator.evaluatePreLoad(m, context, into: &trace), let laterSteps {
        trace.skipRemaining(because: laterSteps)
      }
      return .init(
        file: file.file, moduleID: m.moduleID, manifest: m, trace: trace,
        granted: ApprovalRules.granted(m, approvals: context.value.approvals))
    case .ignored, .invalid, .duplicate, .unreadable:
      trace.fail(.discover, file.outcome.reason ?? .validationFailed, file.outcome.detail)
      trace.skipRemaining(because: "not evaluated: discover failed")
      return .init(file: file.file, moduleID: file.moduleID, manifest: nil, trace: trace)
    }
  }
}
