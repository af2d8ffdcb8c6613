import ForsettiBinary
import ForsettiBridge
import ForsettiCore

/// A started module, however it runs: what the lifecycle asks of it once it is started. How it
/// gets started differs (in-process on the main thread; isolated, many workers at once), so
/// starting is not part of it.
protocol ModuleInstance: AnyObject {
  var moduleID: String { get }
  /// Its worker process, when it runs in one.
  var workerPID: Int32? { get }
  /// The module's state for its next instance; nil when it keeps none or cannot say in time.
  func saveState() -> [UInt8]?
  /// Tells it to stop without waiting, when it can be (a worker); `stop` then waits for it.
  func requestStop()
  /// Stops it; never waits past its deadline. An in-process module can only end `.stopped`.
  func stop() -> WorkerStopOutcome
}

extension ModuleInstance {
  func requestStop() {}
}

/// A module loaded into the host process: its table and the host functions bound to it.
final class InProcessInstance: ModuleInstance {
  let moduleID: String
  let loaded: LoadedModule
  let binding: ModuleBinding

  init(moduleID: String, loaded: LoadedModule, binding: ModuleBinding) {
    self.moduleID = moduleID
    self.loaded = loaded
    self.binding = binding
  }

  var workerPID: Int32? { nil }

  func saveState() -> [UInt8]? { StateTransfer.save(loaded.table) }

  /// Off the bus first, then `stop`, then its host functions revoked: a late call from a thread
  /// it left behind finds them gone.
  func stop() -> WorkerStopOutcome {
    let t = loaded.table.pointee
    binding.backend.moduleStopping(moduleID: moduleID)
    t.stop?(t.`self`)
    binding.revoke()
    return .stopped
  }
}

/// A module in a confined worker process: the host's half of the worker protocol does the
/// talking (`WorkerProcess`).
final class IsolatedInstance: ModuleInstance {
  let worker: WorkerProcess
  let stopTimeout: Double

  init(worker: WorkerProcess, stopTimeout: Double) {
    self.worker = worker
    self.stopTimeout = stopTimeout
  }

  var moduleID: String { worker.moduleID }
  var workerPID: Int32? { worker.pid }

  /// Seconds an isolated module may take to hand over its state before a reload goes on
  /// without it.
  static let saveStateTimeout = 2.0

  func saveState() -> [UInt8]? { worker.saveModuleState(timeout: Self.saveStateTimeout) }

  func requestStop() { worker.requestStop() }

  func stop() -> WorkerStopOutcome { worker.stopModule(timeout: stopTimeout) }
}
