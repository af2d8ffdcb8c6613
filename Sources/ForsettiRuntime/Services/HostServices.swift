import CForsetti
import ForsettiBridge
import ForsettiCore

/// The services of ABI 1.1 as the host serves them, for modules in-process and in workers alike:
/// every `ServiceRequest` ends here, with the caller as the host bound it. The capability an
/// operation needs (`ServiceOperation.capability`) is checked here, once, on every call.
package final class HostServices: Sendable {
  let roles: RoleRegistry
  let secureStorage: SecureStorageService
  let crypto: CryptoService
  let fileExport: FileExportService
  let diagnostics: DiagnosticsBoard
  /// The services the embedding application offers modules.
  package let applications: ApplicationServices
  private let log: any LogSink

  init(
    stateDirectory: String, exportDirectory: String?, quotas: ServiceQuotas = .standard, log: any LogSink,
    applications: ApplicationServices = ApplicationServices()
  ) {
    self.log = log
    self.applications = applications
    let warn: @Sendable (String, String) -> Void = { moduleID, line in
      log.write(LogRecord(level: .warning, moduleID: moduleID, message: line, origin: .host))
    }
    roles = RoleRegistry(warn: warn)
    let keys = ModuleKeys(stateDirectory: stateDirectory)
    secureStorage = SecureStorageService(
      stateDirectory: stateDirectory, keys: keys, quotaBytes: quotas.secureStorageBytes, warn: warn)
    crypto = CryptoService(keys: keys, warn: warn)
    fileExport = FileExportService(directory: exportDirectory, quotaBytes: quotas.exportBytes, warn: warn)
    diagnostics = DiagnosticsBoard()
  }

  /// The answer to `r` from `caller`.
  func answer(_ r: ServiceRequest, from caller: ModuleCaller) -> ServiceReply {
    if let needed = r.operation.capability, !caller.granted.contains(needed) {
      log.write(
        LogRecord(
          level: .warning, moduleID: caller.moduleID,
          message:
            "\(ReasonCode.capabilityDenied.rawValue): a \(needed.rawValue) call was refused: capability \(needed.rawValue) was not granted",
          metadata: ["reason": ReasonCode.capabilityDenied.rawValue, "capability": needed.rawValue],
          origin: .host))
      return .status(FORSETTI_ERR_DENIED)
    }
    switch r.operation {
    case .secureSet, .secureGet, .secureRemove: return secureStorage.answer(r, from: caller)
    case .exportWrite: return fileExport.answer(r, from: caller)
    case .cryptoRandom, .cryptoHash, .cryptoSeal, .cryptoOpen, .cryptoSign, .cryptoVerify, .cryptoPublicKey:
      return crypto.answer(r, from: caller)
    case .diagnosticsReport, .diagnosticsCounter: return diagnostics.answer(r, from: caller)
    case .roleCall: return roles.call(r, from: caller)
    // Installing a handler is `HostBackend.serveRole`; a worker's arrives in `WorkerProcess`.
    // So are a worker's own channel requests (`WorkerProcess.answerService`).
    case .roleServe, .roleConnect, .roleStalled, .roleWaiting: return .status(FORSETTI_ERR_INVALID_ARGUMENT)
    case .applicationCall, .applicationResolve:
      return applications.answer(r, from: caller) { line in
        log.write(LogRecord(level: .warning, moduleID: caller.moduleID, message: line, origin: .host))
      }
    }
  }

  /// The module stopped (or is stopping): it serves nothing and reports nothing any more.
  func moduleGone(_ moduleID: String, instance: UInt64) {
    roles.withdraw(moduleID, instance: instance)
    diagnostics.forget(moduleID)
  }

  /// What each running module reported about its own health (diagnostics.h), by module ID;
  /// a module that reported nothing, or stopped, is absent.
  package var reportedHealth: [String: ModuleHealth] { diagnostics.snapshot }
}
