/// What a loaded ui/app module offers to the host's UI surface.
public struct UIContributions: Sendable, Hashable {
  public var themeMask: ThemeMask?
  public var toolbarItems: [ToolbarItem]
  public var viewInjections: [ViewInjection]
  public var overlay: OverlaySchema?

  public init(
    themeMask: ThemeMask? = nil, toolbarItems: [ToolbarItem] = [], viewInjections: [ViewInjection] = [],
    overlay: OverlaySchema? = nil
  ) {
    self.themeMask = themeMask
    self.toolbarItems = toolbarItems
    self.viewInjections = viewInjections
    self.overlay = overlay
  }

  /// Whether the module contributes anything at all.
  public var isEmpty: Bool {
    themeMask == nil && toolbarItems.isEmpty && viewInjections.isEmpty
      && (overlay.map { $0.routes.isEmpty && $0.pointers.isEmpty } ?? true)
  }
}

/// A toolbar button; its action, when set, opens one of the module's overlay routes.
public struct ToolbarItem: Sendable, Hashable {
  public var itemID: String
  public var title: String
  public var actionRouteID: String?

  public init(itemID: String, title: String, actionRouteID: String? = nil) {
    self.itemID = itemID
    self.title = title
    self.actionRouteID = actionRouteID
  }
}

/// A view placed into a host slot; higher priority comes first within a slot.
public struct ViewInjection: Sendable, Hashable {
  public var viewID: String
  public var slotID: String
  public var priority: Int

  public init(viewID: String, slotID: String, priority: Int = 0) {
    self.viewID = viewID
    self.slotID = slotID
    self.priority = priority
  }
}

/// Overlay routes and the pointers that lead to them.
public struct OverlaySchema: Sendable, Hashable {
  public var routes: [String]
  public var pointers: [String]

  public init(routes: [String] = [], pointers: [String] = []) {
    self.routes = routes
    self.pointers = pointers
  }
}

/// A module's theme declaration: token name → colour `#RRGGBB` or `#RRGGBBAA`. Validated, then
/// stripped before publication: host shell styling stays the host's.
public struct ThemeMask: Sendable, Hashable {
  public var themeID: String
  public var tokens: [String: String]

  public init(themeID: String, tokens: [String: String] = [:]) {
    self.themeID = themeID
    self.tokens = tokens
  }

  /// What is wrong with the mask's shape; empty when valid.
  public var problems: [String] {
    var out: [String] = []
    if themeID.allSatisfy(\.isWhitespace) { out.append("themeMask.themeID must not be blank") }
    for (name, value) in tokens.sorted(by: { $0.key < $1.key }) {
      if name.isEmpty { out.append("themeMask has a token with an empty name") }
      if !ThemeMask.isColor(value) {
        out.append("themeMask token \(name): \"\(value)\" is not a colour #RRGGBB or #RRGGBBAA")
      }
    }
    return out
  }

  static func isColor(_ s: String) -> Bool {
    guard s.first == "#", s.count == 7 || s.count == 9 else { return false }
    return s.dropFirst().allSatisfy { $0.isASCII && $0.isHexDigit }
  }
}
