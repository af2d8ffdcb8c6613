import ForsettiCore

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

  /// Step 8 on a loaded module: its descriptor and UI contributions against its manifest, decided
  /// without recording it (a worker's start is decided before it is recorded).
  init(_ m: ModuleManifest, _ d: ModuleDescriptor, _ ui: UIContributions?) {
    if case .fail(let v) = IdentityRules.check(m, d) {
      self = .fail(v)
      return
    }
    let c = ui ?? UIContributions()
    if case .fail(let v) = UIContributionRules.check(m, c) {
      self = .fail(v)
      return
    }
    self = .pass(
      "descriptor agrees (\(m.moduleID) \(m.moduleType.rawValue) \(m.moduleVersion)); \(Self.describe(c))")
  }

  /// The verdict as a `Result`, for code outside the lifecycle (`IsolatedStarter`).
  var result: Result<String, GateViolation> {
    switch self {
    case .pass(let detail): .success(detail)
    case .fail(let v): .failure(v)
    }
  }

  private static func describe(_ c: UIContributions) -> String {
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
}
