import ForsettiCore

/// The `reload` answer: what reloading one module (and restarting its consumers) did, one
/// report per module, each with its line and, when it did not reload, the trace that says why.
enum ReloadAnswers {
  static func answer(_ id: String, host: LiveHost) throws(ControlFailure) -> ReloadAnswer {
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
    return ReloadAnswer(
      module: id, reloaded: ok,
      reports: reports.map { r in
        let trace = r.outcome == .reloaded ? [] : r.trace?.entries.filter { $0.verdict != .skipped } ?? []
        return ReloadAnswer.Report(moduleID: r.moduleID, line: r.line, trace: trace.map(TraceStep.init))
      })
  }
}
