import CForsetti
import ForsettiBridge
import ForsettiCore

/// forsetti/services/secure_storage.h on the host's side.
final class SecureStorageService: Sendable {
  let stateDirectory: String
  let keys: ModuleKeys
  let warn: @Sendable (String, String) -> Void

  init(stateDirectory: String, keys: ModuleKeys, warn: @escaping @Sendable (String, String) -> Void) {
    self.stateDirectory = stateDirectory
    self.keys = keys
    self.warn = warn
  }

  func answer(_ r: ServiceRequest, from caller: ModuleCaller) -> ServiceReply {
    // Skeleton: not built yet.
    .status(FORSETTI_ERR_UNAVAILABLE)
  }
}
