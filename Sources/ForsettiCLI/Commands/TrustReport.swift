import ForsettiCore
import ForsettiRuntime

/// What `explain` says about trust: the entitlement evaluation (final decision, which override
/// decided, every provider's state in order, active vs required products), the approval state
/// and the licences on file.
struct TrustReport {
  var evaluation: EntitlementEvaluation
  var requested: Set<Capability>
  var approved: Set<Capability>?
  var approveAll: Bool
  var licences: [String]

  static func make(_ m: ModuleManifest?, options: HostOptions) throws(CommandFailure) -> TrustReport? {
    guard let m else { return nil }
    let context = try options.gateContext(discovered: [m])
    let stored = try? options.storedApprovals()
    let licences = LicenceEntitlementProvider.load(
      stateDirectory: options.stateDirectory, staticProducts: [], now: context.now)
    return TrustReport(
      evaluation: context.entitlement(m), requested: m.capabilitySet, approved: stored?.approved[m.moduleID],
      approveAll: options.approveAll, licences: licences.report)
  }

  var decision: ApprovalDecision { ApprovalRules.evaluate(requested: requested, approved: approved) }

  var text: String {
    var out = "  entitlement: \(evaluation.unlocked ? "UNLOCKED" : "LOCKED") — \(evaluation.summary)\n"
    for s in evaluation.steps { out += "    \(s.channel) override, \(s.provider): \(s.state.rawValue)\n" }
    out +=
      "    required product: \(evaluation.requiredProduct ?? "none (free)"); active: \(evaluation.activeProducts.isEmpty ? "none" : evaluation.activeProducts.joined(separator: ", "))\n"
    for l in licences { out += "    licence \(l)\n" }
    let d = decision
    func list(_ s: Set<Capability>) -> String {
      s.isEmpty ? "none" : s.sorted().map(\.rawValue).joined(separator: ", ")
    }
    out +=
      "  approval: requested \(list(requested)); approved \(approved.map(list) ?? "never"); pending \(list(d.pending))"
    out += approveAll ? " (--approve-all in force)\n" : "\n"
    return out
  }

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
