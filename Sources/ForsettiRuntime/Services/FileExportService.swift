import CForsetti
import ForsettiBridge
import ForsettiCore

/// forsetti/services/file_export.h on the host's side.
final class FileExportService: Sendable {
  /// The operator's export directory (`--export-dir`); nil when none was given.
  let directory: String?
  let warn: @Sendable (String, String) -> Void

  init(directory: String?, warn: @escaping @Sendable (String, String) -> Void) {
    self.directory = directory
    self.warn = warn
  }

  func answer(_ r: ServiceRequest, from caller: ModuleCaller) -> ServiceReply {
    // Skeleton: not built yet.
    .status(FORSETTI_ERR_UNAVAILABLE)
  }
}
