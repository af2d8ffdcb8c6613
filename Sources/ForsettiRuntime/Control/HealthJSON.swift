import ForsettiCore
import FoundationEssentials

/// The health modules report about themselves (forsetti/services/diagnostics.h) in a control
/// answer: the module's own words, marked as its own, and known only to a running host.
package enum HealthJSON {
  /// One module's report: null when it made none, or when nobody knows (`healthKnown` says
  /// which).
  package static func of(_ moduleID: String?, in reports: [String: ModuleHealth]?) -> JSONValue {
    guard let moduleID, let h = reports?[moduleID] else { return .null }
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
}
