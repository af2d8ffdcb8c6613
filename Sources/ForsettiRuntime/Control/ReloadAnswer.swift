import ForsettiCore

/// The `reload` answer: what reloading one module (and restarting its consumers) did, one
/// report per module, each with its line and, when it did not reload, the trace that says why.
enum ReloadAnswer {
  static func answer(_ id: String, host: LiveHost) throws(ControlFailure) -> JSONValue {
    let reports: [ReloadReport]?
    do { reports = try host.reload(id) } catch { throw .judging(error) }
    guard let reports else {
      throw .noModule(
        id, among: host.manager.records.compactMap(\.moduleID),
        manifests: host.judge.configuration.manifestsDirectory)
    }
    let ok = reports.allSatisfy {
      switch $0.outcome {
      case .reloaded, .started, .restartedAfterProvider: true
      default: false
      }
    }
    return .object(
      JSONObject([
        ("module", .string(id)), ("reloaded", .bool(ok)),
        (
          "reports",
          .array(
            reports.map { r in
              let trace =
                r.outcome == .reloaded ? [] : r.trace?.entries.filter { $0.verdict != .skipped } ?? []
              return .object(
                JSONObject([
                  ("moduleID", .string(r.moduleID)), ("line", .string(r.line)),
                  ("trace", .array(trace.map(TraceJSON.entry))),
                ]))
            })
        ),
      ]))
  }
}
