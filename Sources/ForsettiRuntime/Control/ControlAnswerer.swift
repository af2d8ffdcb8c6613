import ForsettiCore
import Glibc

/// Answers control requests (docs/control.md) from a host's own state: its judge with its
/// in-memory overrides, its modules' run states and the health they reported. A verb that
/// writes the state directory goes through the runtime's stores (one `StateTransaction`), then
/// the host reconciles at once and the answer lists the modules whose state changed. With no
/// host (`init(files:)`), the same answers are computed over a fresh judge and the files, so the
/// command line shows one thing either way.
///
/// Runs on the host's thread (`ControlServer.serve`): a request never races a module's start or
/// stop.
package final class ControlAnswerer {
  private let host: LiveHost?
  private let judge: Judge
  private let pid: Int32
  private var stateDirectory: String { judge.configuration.stateDirectory }
  /// The running host's image, for `status` (nil: not said).
  package var image: () -> StatusAnswer.Image? = { nil }
  /// Prepares `upgrade` (the host that can: `forsetti-host run` and `dev`); nil: this host
  /// does not upgrade itself, and says so.
  package var upgrade: (() throws(ControlFailure) -> UpgradeAnswer)?

  /// Answers for the running `host` (its judge's state directory) and its `pid`.
  package init(host: LiveHost, pid: Int32) {
    self.host = host
    self.judge = host.judge
    self.pid = pid
  }

  /// Answers with no host running: from the files, judged by `judge`.
  package init(files judge: Judge, pid: Int32 = 0) {
    self.host = nil
    self.judge = judge
    self.pid = pid
  }

  /// The answer to `request`, with the changes it made.
  package func answer(_ request: ControlRequest) -> ControlResponse {
    let before = states()
    do throws(ControlFailure) {
      let answer = try compute(request.command).json
      if request.command.writes, let host { host.reconcile() }
      return ControlResponse(
        pid: pid, stateDirectory: stateDirectory, outcome: .answered(answer, changes: changes(since: before)))
    } catch {
      return ControlResponse(pid: pid, stateDirectory: stateDirectory, outcome: .failed(error))
    }
  }

  /// The answer of `command`, or why there is none.
  package func compute(_ command: ControlCommand) throws(ControlFailure) -> any ControlAnswerDocument {
    switch command {
    case .status:
      guard let host else {
        let last = try ControlView.files(judge).run?.pid
        return StatusAnswer.notRunning(stateDirectory: stateDirectory, lastPID: last)
      }
      // A module whose manifest is gone (a package removed) is stopped, and no longer the
      // host's: not counted (its record stays in the table until the host restarts).
      let manifests = judge.configuration.manifestsDirectory
      let present = host.manager.records.filter { r in
        r.state != .stopped || access(PathText.join(manifests, r.file), F_OK) == 0
      }
      return StatusAnswer.running(
        pid: pid, stateDirectory: stateDirectory, states: present.map(\.state.name), image: image())
    case .upgrade:
      guard host != nil else {
        throw .located(
          .failed, .stateDirectory, stateDirectory, "no host is running on it; upgrade needs a running host")
      }
      guard let upgrade else {
        throw ControlFailure(
          .refused, "this host does not upgrade itself: it runs inside an application, which upgrades it")
      }
      return try upgrade()
    case .list: return try VerdictAnswers.list(try view())
    case .explain(let m): return try VerdictAnswers.explain(try view(), module: m)
    case .surface: return try SurfaceAnswers.answer(stateDirectory: stateDirectory)
    case .approve(let m, let caps): return try ApprovalAnswers.approve(m, caps, judge: judge)
    case .revoke(let m, let caps): return try ApprovalAnswers.revoke(m, caps, judge: judge)
    case .enable(let m): return try ActivationAnswers.enable(m, judge: judge)
    case .disable(let m): return try ActivationAnswers.disable(m, judge: judge)
    case .select(let m): return try ActivationAnswers.select(m, judge: judge)
    case .overrideList:
      return try OverrideAnswers.listing(
        stateDirectory: stateDirectory,
        inMemory: host.map { $0.judge.configuration.inMemoryOverrides.snapshot })
    case .override(let order):
      // An order wrong in itself is refused as such, before whether a host runs matters.
      do { try OverrideOrderError.check(order) } catch { throw error.failure }
      guard order.inMemory else { return try OverrideAnswers.set(order, stateDirectory: stateDirectory) }
      guard host != nil else {
        throw .located(
          .failed, .stateDirectory, stateDirectory,
          "no host is running on \(stateDirectory); an in-memory override lives only in a running host")
      }
      return try OverrideAnswers.inMemory(order, overrides: judge.configuration.inMemoryOverrides)
    case .reload(let m):
      guard let host else {
        throw .located(
          .failed, .stateDirectory, stateDirectory, "no host is running on it; reload needs a running host")
      }
      return try ReloadAnswers.answer(m, host: host)
    }
  }

  /// What list and explain are computed from.
  private func view() throws(ControlFailure) -> ControlView {
    guard let host else { return try ControlView.files(judge) }
    var view = ControlView(
      judge: judge, run: .live(host.manager.records, pid: pid),
      health: host.manager.environment.services.reportedHealth, inMemoryKnown: true)
    view.serving = RoleServingReport.make(host.manager.environment)
    return view
  }

  private func states() -> [String: String] {
    guard let host else { return [:] }
    return Dictionary(host.manager.records.compactMap { r in r.moduleID.map { ($0, r.state.description) } }) {
      a, _ in a
    }
  }

  /// The modules whose state the request changed, and their states now.
  private func changes(since before: [String: String]) -> [ModuleChange] {
    guard let host else { return [] }
    return host.manager.records.compactMap { r in
      guard let id = r.moduleID, before[id] != r.state.description else { return nil }
      return ModuleChange(moduleID: id, state: r.state.description)
    }
  }
}
