import ForsettiBinary
import ForsettiCore

/// What `explain` says about trust: the entitlement evaluation (final decision, which override
/// decided, every provider's state in order, active vs required products), the approval state
/// and the licences on file.
struct TrustReport {
  var evaluation: EntitlementEvaluation
  var requested: Set<Capability>
  var approved: Set<Capability>?
  var approveAll: Bool
  var licences: [String]

  static func make(_ m: ModuleManifest?, context: GateContext, judge: Judge) -> TrustReport? {
    guard let m else { return nil }
    // The ledger the judge read for this answer; with --approve-all it is not the file's, which
    // explain still shows.
    let stored = judge.configuration.approveAll ? try? judge.storedApprovals() : context.approvals
    let licences = LicenceEntitlementProvider.load(
      stateDirectory: judge.configuration.stateDirectory, staticProducts: [], now: context.now)
    return TrustReport(
      evaluation: context.entitlement(m), requested: m.capabilitySet, approved: stored?.approved[m.moduleID],
      approveAll: judge.configuration.approveAll, licences: licences.report)
  }

  var decision: ApprovalDecision { ApprovalRules.evaluate(requested: requested, approved: approved) }

  var entitlementJSON: JSONValue {
    let decided: String =
      switch evaluation.decidedBy {
      case .free: "free"
      case .moduleOverride(let p, _): "moduleOverride:\(p)"
      case .productOverride(let p, _): "productOverride:\(p)"
      case .provider(let p): "provider:\(p)"
      }
    return .object(
      JSONObject([
        ("unlocked", .bool(evaluation.unlocked)), ("decidedBy", .string(decided)),
        ("summary", .string(evaluation.summary)),
        (
          "steps",
          .array(
            evaluation.steps.map {
              .object(
                JSONObject([
                  ("channel", .string($0.channel)), ("provider", .string($0.provider)),
                  ("state", .string($0.state.rawValue)),
                ]))
            })
        ),
        ("requiredProduct", .string(orNull: evaluation.requiredProduct)),
        ("activeProducts", .strings(evaluation.activeProducts)),
      ]))
  }

  var approvalJSON: JSONValue {
    .object(
      JSONObject([
        ("requested", .strings(requested.sorted().map(\.rawValue))),
        ("approved", approved.map { .strings($0.sorted().map(\.rawValue)) } ?? .null),
        ("pending", .strings(decision.pending.sorted().map(\.rawValue))), ("approveAll", .bool(approveAll)),
      ]))
  }
}

/// What `explain` says about signatures: whether the operator requires them, the keys trusted
/// for modules (and any trusted for nothing), and what this module's signature is and counted for.
struct SignatureStepReport {
  var required: Bool
  var moduleKeys: [TrustedKeyFile]
  var roleless: [String]
  var stateDirectory: String
  /// The binary the module's entry point was found in; nil when not inspected or not found.
  var binary: String?
  var finding: SignatureFinding?
  var outcome: GateOutcome?
  var note: String

  static func make(_ m: ModuleManifest?, index: BinaryIndex?, judge: Judge) -> SignatureStepReport {
    let state = judge.configuration.stateDirectory
    var report = SignatureStepReport(
      required: judge.configuration.requireSignatures,
      moduleKeys: TrustedKeys.files(stateDirectory: state).filter { $0.role == .modules && $0.keyID != nil },
      roleless: TrustedKeys.roleless(stateDirectory: state), stateDirectory: state, note: "")
    guard let m, let index else {
      report.note = "binary not inspected (no --plugins directory given)"
      return report
    }
    guard case .success(let facts) = index.locate(entryPoint: m.entryPoint) else {
      report.note = "no binary found for \(m.entryPoint); see the binaryInspection step"
      return report
    }
    let finding = SignatureFinding.read(binary: facts.path, trusted: judge.moduleKeys)
    let (outcome, note) = judge.signaturePolicy.judge(finding, binary: facts.path)
    report.binary = facts.path
    report.finding = finding
    report.outcome = outcome
    report.note = outcome.violation.map { "\($0.reason.rawValue): \($0.detail)" } ?? note
    return report
  }

  var setting: String {
    required
      ? "required (--require-signatures): a module must be signed by a key in \(TrustedKeys.directory(.modules, stateDirectory: stateDirectory))/"
      : "not required (no --require-signatures): an unsigned module runs; a signature by a key trusted for modules must match"
  }

  var json: JSONValue {
    var o = JSONObject([
      ("required", .bool(required)),
      (
        "moduleKeys",
        .array(
          moduleKeys.map {
            .object(JSONObject([("file", .string($0.path)), ("keyID", .string(orNull: $0.keyID))]))
          })
      ),
      ("rolelessKeys", .strings(roleless)), ("setting", .string(setting)),
      (
        "warnings", .strings(roleless.map { TrustedKeys.rolelessWarning($0, stateDirectory: stateDirectory) })
      ),
    ])
    o["binary"] = .string(orNull: binary)
    o["signaturePath"] = .string(orNull: binary.map(ModuleSignature.path(for:)))
    o["finding"] = .string(orNull: finding?.name)
    o["keyID"] = .string(orNull: finding?.keyID)
    o["passed"] = outcome.map { .bool($0.violation == nil) } ?? .null
    o["reason"] = .string(orNull: outcome?.violation?.reason.rawValue)
    o["detail"] = .string(note)
    return .object(o)
  }
}
