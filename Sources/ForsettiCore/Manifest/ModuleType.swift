/// What kind of module a manifest describes.
public enum ModuleType: String, Sendable, Hashable, CaseIterable {
  /// Background behaviour; runs side by side with other services.
  case service
  /// A feature UI contributing toolbar items, views or overlays.
  case ui
  /// A complete single application carrying the primary UI.
  case app

  /// Whether the module contributes to the host's UI surface.
  public var isVisual: Bool { self != .service }
}
