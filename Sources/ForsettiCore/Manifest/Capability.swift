/// What a module may ask the host for; the raw values are the manifest's strings.
public enum Capability: String, Sendable, Hashable, CaseIterable, Comparable {
  case networking = "networking"
  case storage = "storage"
  case secureStorage = "secure_storage"
  case fileExport = "file_export"
  case cryptoUtilities = "crypto_utilities"
  case telemetry = "telemetry"
  case routingOverlay = "routing_overlay"
  case uiThemeMask = "ui_theme_mask"
  case toolbarItems = "toolbar_items"
  case viewInjection = "view_injection"
  case sharedDatabase = "shared_database"
  case authentication = "authentication"
  case diagnostics = "diagnostics"
  case api = "api"
  case security = "security"

  public static func < (a: Capability, b: Capability) -> Bool { a.rawValue < b.rawValue }
}
