import CForsetti
import ForsettiBridge
import ForsettiCore

/// forsetti/services/diagnostics.h on the host's side: the latest health each running module
/// reported about itself.
final class DiagnosticsBoard: Sendable {
  init() {}

  func answer(_ r: ServiceRequest, from caller: ModuleCaller) -> ServiceReply {
    // Skeleton: not built yet.
    .status(FORSETTI_ERR_UNAVAILABLE)
  }

  /// Drops what `moduleID` reported: it stopped.
  func forget(_ moduleID: String) {}
}
