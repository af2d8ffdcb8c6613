import ForsettiCore
import ForsettiRuntime

/// The human form of `check`: one aligned line per module, then a summary.
enum CheckReport {
  static func text(_ judgements: [ModuleJudgement], ignored: [String], strictStop: String?) -> String {
    let idWidth = min(48, judgements.map { ($0.moduleID ?? "-").count }.max() ?? 0)
    var out = ""
    for j in judgements {
      let id = (j.moduleID ?? "-").padded(to: max(idWidth, 1))
      if let failure = j.trace.firstFailure, let reason = failure.reason {
        out +=
          "BLOCKED  \(id)  \(j.file)  \(reason.rawValue) at \(failure.step.rawValue): \(failure.detail)\n"
      } else {
        out += "PASS     \(id)  \(j.file)\n"
      }
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
}
