import ForsettiBridge
import ForsettiCore

// Interim: the protocol file's stop and save-state requests, until it lands.

enum WorkerStopOutcome: Sendable, Equatable {
  case stopped
  case killedAfterTimeout(Double)
  case crashed(String)
  case violated(ProtocolViolation)
}

extension WorkerProcess {
  func stopModule(timeout: Double) -> WorkerStopOutcome {
    prepareStop()
    if let v = session.violation {
      end()
      return .violated(v)
    }
    let deadline = ContinuousClock.now + .wait(timeout)
    let asked = !isClosed && stop()
    while asked {
      guard let event = events.next(until: deadline) else {
        end()
        return .killedAfterTimeout(timeout)
      }
      switch event {
      case .frame(let f) where f.kind == .stopped:
        end(grace: ModuleManager.exitGrace)
        return .stopped
      case .frame: continue
      case .violated(let v):
        end()
        return .violated(v)
      case .closed: break
      }
      break
    }
    let status = end(grace: ModuleManager.exitGrace)
    if let status, WorkerProcess.signal(of: status) == nil, status == 0 { return .stopped }
    let tail = recentLines.suffix(3).joined(separator: " | ")
    return .crashed(
      "worker \(describeExit(status)) during stop\(tail.isEmpty ? "" : "; last lines: \(tail)")")
  }

  func saveModuleState(timeout: Double) -> [UInt8]? {
    guard let id = session.saveState() else { return nil }
    send(WireFrame(.saveState, id: id))
    let deadline = ContinuousClock.now + .wait(timeout)
    while let e = events.next(until: deadline) {
      switch e {
      case .frame(let f) where f.kind == .stateSaved:
        return f.bytes(0).flatMap { $0.isEmpty ? nil : $0 }
      case .frame: continue
      case .violated, .closed: return nil
      }
    }
    session.abandonSave(id)
    return nil
  }
}
