import ForsettiBridge
import ForsettiCore

/// Stops started modules and records how each stop went: one at a time (a reload, a refusal),
/// or all of them, consumers before the providers they depend on (`StartOrder`, reversed),
/// revoking each one's host functions (in-process) or ending its worker (isolated).
struct ModuleStopper {
  let table: ModuleTable
  let environment: HostEnvironment
  /// The isolated mode's workers, let go of with the last module; nil in-process.
  let workers: WorkerSupply?
  let stateFiles: RuntimeStatePublisher

  /// Stops every started module, and the spare worker and zygote with them.
  func stopAll() {
    workers?.keepsSpare = false
    for i in table.handles { table[i].forgetRestarts() }
    // A level at a time, consumers' levels first: every worker of a level is told at once and
    // then waited for, so a thousand independent modules stop in about one module's time.
    for level in stopLevels(table.running) {
      for i in level { table[i].instance?.requestStop() }
      for i in level { stop(i) }
    }
    workers?.source.release()
    stateFiles.persist()
  }

  /// `stopOrder(running)` cut into the levels of `StartOrder.levels`, the last level first:
  /// nothing in a level depends on another module of it.
  private func stopLevels(_ running: [SlotHandle]) -> [[SlotHandle]] {
    let manifests = running.compactMap { table[$0].record.manifest }
    var level: [String: Int] = [:]
    for (n, l) in StartOrder.levels(manifests).enumerated() {
      for m in l { level[m.moduleID] = n }
    }
    var levels: [(level: Int, slots: [SlotHandle])] = []
    for i in stopOrder(running) {
      let n = table[i].record.moduleID.flatMap { level[$0] } ?? Int.max
      if let last = levels.indices.last, levels[last].level == n {
        levels[last].slots.append(i)
      } else {
        levels.append((n, [i]))
      }
    }
    return levels.map(\.slots)
  }

  /// `running` (in start order) in the order to stop it: the reverse of the dependency order,
  /// not of the order things happened to start in — a provider restarted after a crash started
  /// after its consumers, yet must still stop after them.
  private func stopOrder(_ running: [SlotHandle]) -> [SlotHandle] {
    let manifests = running.compactMap { table[$0].record.manifest }
    var rank: [String: Int] = [:]
    for (n, m) in StartOrder.order(manifests).enumerated() { rank[m.moduleID] = n }
    return running.enumerated().sorted { a, b in
      let ra = table[a.element].record.moduleID.flatMap { rank[$0] } ?? Int.max
      let rb = table[b.element].record.moduleID.flatMap { rank[$0] } ?? Int.max
      return ra != rb ? ra > rb : a.offset > b.offset
    }.map(\.element)
  }

  /// Stops module `i` if it runs, recording how the stop went; whether it was running.
  @discardableResult
  func stop(_ i: SlotHandle) -> Bool {
    guard let instance = table[i].release(as: .stopped) else { return false }
    let id = instance.moduleID
    switch instance.stop() {
    case .stopped:
      environment.hostLog(.info, "stopped \(id)", subject: id)
    case .killedAfterTimeout(let t):
      environment.hostLog(.warning, about: id, "stop did not return within \(t) s; the worker was killed")
    case .crashed(let why):
      table[i].held(.failed(.crashed))
      environment.hostLog(.error, about: id, "crashed: \(why)")
    case .violated(let v):
      table[i].held(.failed(.protocolViolation))
      environment.hostLog(
        .error, about: id, "\(ReasonCode.protocolViolation.rawValue) during stop: \(v)",
        ["reason": ReasonCode.protocolViolation.rawValue])
    }
    return true
  }
}
