import ForsettiCore
import ForsettiRuntime

/// The human form of `check`: one aligned line per module, then a summary.
enum CheckReport {
  /// With `trace`, each module's steps follow its line, as `explain` prints them.
  static func text(
    _ judgements: [ModuleJudgement], ignored: [String], strictStop: String?, trace: Bool = false
  )
    -> String
  {
    let idWidth = min(48, judgements.map { ($0.moduleID ?? "-").count }.max() ?? 0)
    var out = ""
    for j in judgements {
      let id = (j.moduleID ?? "-").padded(to: max(idWidth, 1))
      // The file's name is the vendor's: shown by the module-text rule, as is the detail.
      let file = ModuleText.visible(j.file)
      if let failure = j.trace.firstFailure, let reason = failure.reason {
        out +=
          "BLOCKED  \(id)  \(file)  \(reason.rawValue) at \(failure.step.rawValue): \(LogRecord.streamSafe(failure.detail))\n"
      } else {
        out += "PASS     \(id)  \(file)\n"
      }
      if trace { out += steps(j.trace) }
    }
    let passed = judgements.filter(\.passed).count
    var summary =
      "\(judgements.count) module\(judgements.count == 1 ? "" : "s"): \(passed) pass, \(judgements.count - passed) blocked"
    if !ignored.isEmpty {
      summary += ", \(ignored.count) non-manifest JSON file\(ignored.count == 1 ? "" : "s") ignored"
    }
    out += summary + "\n"
    if let strictStop { out += "strict discovery stopped at \(strictStop); later files were not read\n" }
    return out
  }

  /// One line per step: verdict, step, reason code and detail (shown by the module-text rule).
  static func steps(_ trace: GateTrace) -> String {
    var out = ""
    for e in trace.entries {
      out +=
        "  \(e.verdict.rawValue.uppercased().padded(to: 7)) \(e.step.rawValue.padded(to: 19)) \(e.reason.map { "\($0.rawValue): " } ?? "")\(LogRecord.streamSafe(e.detail))\n"
    }
    return out
  }
}
