import ForsettiCore
import ForsettiRuntime
import FoundationEssentials
import Glibc

/// The health modules report about themselves (forsetti/services/diagnostics.h) as `list`,
/// `explain` and the debug page show it: the module's own words, marked so and escaped, and
/// known only to a running host (the control socket passes it in; on the files it is unknown).
enum ReportedHealth {
  /// What the running host answering holds, by module ID.
  case live([String: ModuleHealth])
  /// No running host answered: nobody knows.
  case unknown

  static let unknownText = "no running host: health unknown"
  /// How every place that shows a report marks it.
  static let marker = "reported by the module"
  /// The longest summary shown in a `list` row.
  static let listSummary = 60

  var known: Bool {
    if case .live = self { return true }
    return false
  }

  func of(_ moduleID: String?) -> ModuleHealth? {
    guard case .live(let all) = self, let moduleID else { return nil }
    return all[moduleID]
  }

  /// The `list` cell: the status and the start of the summary; `-` when nothing was reported.
  func cell(_ moduleID: String?) -> String {
    guard known else { return "unknown" }
    guard let h = of(moduleID) else { return "-" }
    var out = h.status?.name ?? "counters only"
    if let s = h.summary {
      let shown = s.count > Self.listSummary ? String(s.prefix(Self.listSummary - 1)) + "…" : s
      out += ": \(LogRecord.streamSafe(shown))"
    }
    return out
  }

  /// The lines under `list`'s table saying what the column is, or that it is unknown.
  var listFooter: String {
    known
      ? "HEALTH is each module's own report (diagnostics), \(Self.marker), not checked by the host\n"
      : "HEALTH: \(Self.unknownText)\n"
  }

  /// `explain`'s section.
  func text(_ moduleID: String?) -> String {
    guard known else { return "  health: \(Self.unknownText)\n" }
    guard let h = of(moduleID) else { return "  health (\(Self.marker)): nothing reported\n" }
    var out = "  health (\(Self.marker)): \(h.status?.name ?? "no status, counters only")\n"
    if let s = h.summary { out += "    summary: \(LogRecord.streamSafe(s))\n" }
    for (name, value) in h.counters.sorted(by: { $0.key < $1.key }) {
      out += "    counter \(LogRecord.streamSafe(name)) = \(value)\n"
    }
    out += "    reported at \(h.updated.formatted(.iso8601))\n"
    return out
  }

  /// The JSON of one module's report: null when none was made, or when it is unknown
  /// (`healthKnown` says which).
  func json(_ moduleID: String?) -> JSONValue {
    guard let h = of(moduleID) else { return .null }
    let counters = h.counters.sorted(by: { $0.key < $1.key }).map {
      ($0.key, JSONValue.number(String($0.value)))
    }
    return .object(
      JSONObject([
        ("reportedBy", .string("module")), ("status", .string(orNull: h.status?.name)),
        ("summary", .string(orNull: h.summary)), ("counters", .object(JSONObject(counters))),
        ("updated", .string(h.updated.formatted(.iso8601))),
      ]))
  }

  /// `healthKnown`, and with no host the note saying why not, for a JSON object.
  func annotate(_ o: inout JSONObject) {
    o["healthKnown"] = .bool(known)
    if !known { o["healthNote"] = .string(Self.unknownText) }
  }
}
