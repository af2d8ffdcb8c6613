import CForsetti
import ForsettiBridge
import ForsettiCore

/// forsetti/services/crypto.h on the host's side.
final class CryptoService: Sendable {
  let keys: ModuleKeys
  let warn: @Sendable (String, String) -> Void

  init(keys: ModuleKeys, warn: @escaping @Sendable (String, String) -> Void) {
    self.keys = keys
    self.warn = warn
  }

  func answer(_ r: ServiceRequest, from caller: ModuleCaller) -> ServiceReply {
    // Skeleton: not built yet.
    .status(FORSETTI_ERR_UNAVAILABLE)
  }
}
