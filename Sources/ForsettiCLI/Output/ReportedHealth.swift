import ForsettiCore
import ForsettiRuntime

/// The health modules report about themselves (forsetti/services/diagnostics.h) as `list` and
/// `explain` show it, rendered from an answer's `health` object: the module's own words, marked
/// so and escaped, and known only to a running host (`healthKnown`).
struct ReportedHealth {
  /// Whether a running host answered (it knows the reports; on the files nobody does).
  var known: Bool

  init(known: Bool) { self.known = known }

  init(_ answer: JSONObject) { known = answer["healthKnown"]?.boolValue ?? false }

  /// How every place that shows a report marks it.
  static let marker = "reported by the module"
  /// The longest summary shown in a `list` row.
  static let listSummary = 60

  /// The `list` cell: the status and the start of the summary; `-` when nothing was reported.
  func cell(_ health: JSONValue?) -> String {
    guard known else { return "unknown" }
    guard let h = health?.objectValue else { return "-" }
    var out = h["status"]?.stringValue ?? "counters only"
    if let s = h["summary"]?.stringValue {
      let shown = s.count > Self.listSummary ? String(s.prefix(Self.listSummary - 1)) + "…" : s
      out += ": \(LogRecord.streamSafe(shown))"
    }
    return out
  }

  /// The lines under `list`'s table saying what the column is, or that it is unknown.
  var listFooter: String {
    known
      ? "HEALTH is each module's own report (diagnostics), \(Self.marker), not checked by the host\n"
      : "HEALTH: \(ListAnswer.healthUnknown)\n"
  }

  /// `explain`'s section.
  func text(_ health: JSONValue?) -> String {
    guard known else { return "  health: \(ListAnswer.healthUnknown)\n" }
    guard let h = health?.objectValue else { return "  health (\(Self.marker)): nothing reported\n" }
    var out = "  health (\(Self.marker)): \(h["status"]?.stringValue ?? "no status, counters only")\n"
    if let s = h["summary"]?.stringValue { out += "    summary: \(LogRecord.streamSafe(s))\n" }
    for (name, value) in h["counters"]?.objectValue?.members ?? [] {
      out += "    counter \(LogRecord.streamSafe(name)) = \(JSONWriter.string(value))\n"
    }
    out += "    reported at \(h["updated"]?.stringValue ?? "?")\n"
    return out
  }
}
