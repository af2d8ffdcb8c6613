import ForsettiCore
import ForsettiRuntime

/// The human and JSON forms of `run`'s results.
enum RunReport {
  static func table(_ records: [ModuleRecord]) -> String {
    let rows = records.map { r -> (String, String, String, String) in
      let id = r.moduleID ?? "-"
      let version = r.manifest.map { $0.moduleVersion.description } ?? "-"
      var detail = r.file
      if let f = r.trace.firstFailure, let reason = f.reason {
        detail = "\(reason.rawValue) at \(f.step.rawValue): \(f.detail)"
      } else if let d = r.startDuration {
        detail = "start returned in \(microseconds(d)) µs"
      } else if r.state == .started, let kept = r.trace.entries.last(where: { $0.step == .start }) {
        // Not started by this image: kept running across an upgrade of the host.
        detail = kept.detail
      }
      // A crash detail quotes the module's own last lines: printed safe for a terminal and the
      // journal (no control characters, no `<digit` a journal would read as a priority).
      return (id, version, r.state.name, LogRecord.streamSafe(detail))
    }
    let w0 = max(6, rows.map(\.0.count).max() ?? 0)
    let w1 = max(7, rows.map(\.1.count).max() ?? 0)
    let w2 = max(5, rows.map(\.2.count).max() ?? 0)
    func pad(_ s: String, _ w: Int) -> String { s.padded(to: w) }
    var out = "\(pad("MODULE", w0))  \(pad("VERSION", w1))  \(pad("STATE", w2))  DETAIL\n"
    for r in rows { out += "\(pad(r.0, w0))  \(pad(r.1, w1))  \(pad(r.2, w2))  \(r.3)\n" }
    return out
  }

  static func microseconds(_ d: Duration) -> Int {
    let (s, atto) = d.components
    return Int(s) * 1_000_000 + Int(atto / 1_000_000_000_000)
  }

  static func summary(_ records: [ModuleRecord]) -> String {
    let stopped = records.filter { $0.state == .stopped }.count
    let blocked = records.filter { if case .blocked = $0.state { true } else { false } }.count
    let failed = records.filter { if case .failed = $0.state { true } else { false } }.count
    let inactive = records.filter { if case .inactive = $0.state { true } else { false } }.count
    return
      "\(records.count) module\(records.count == 1 ? "" : "s"): \(stopped) ran and stopped cleanly, \(blocked) blocked, \(failed) failed\(inactive > 0 ? ", \(inactive) inactive" : "")\n"
  }

  static func json(_ records: [ModuleRecord]) -> JSONValue {
    .object(
      JSONObject([
        (
          "modules",
          .array(
            records.map { r in
              var o = r.summaryJSON
              o["trace"] = .array(r.trace.entries.map(TraceJSON.entry))
              return .object(o)
            })
        )
      ]))
  }
}
