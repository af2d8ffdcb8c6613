import CForsetti

/// What a Swift module author implements. The SDK turns it into forsetti.h's C tables; the
/// host never sees a Swift type.
///
/// `start` and `stop` are called once each, on the host's main thread. Throwing from `start`
/// refuses to start (the host records `startFailed` and does not call `stop`).
public protocol ForsettiModule: AnyObject {
  /// Who the module is; must agree with its manifest (moduleID, moduleType, moduleVersion).
  static var identity: ModuleIdentity { get }
  /// Does no work: the entry point only builds tables, and `start` is where work begins.
  init()
  /// Starts the module's work; must return promptly (long work goes on a thread of its own).
  func start(_ host: Host) throws(ForsettiError)
  /// Ends the module's threads, so no host call happens after it returns.
  func stop()
  /// UI contributions (ui and app modules); checked against the manifest before `start`.
  var uiContributions: UIContributionSet? { get }
  /// Hot reload: the state to hand to the next version, or nil.
  func saveState() -> [UInt8]?
  /// Hot reload: the state the previous version saved, after `start`.
  func restoreState(_ bytes: [UInt8])
}

extension ForsettiModule {
  /// None: a service module contributes no UI.
  public var uiContributions: UIContributionSet? { nil }
  /// None: a module without state to carry starts fresh after a reload.
  public func saveState() -> [UInt8]? { nil }
  /// Ignored, for the same reason.
  public func restoreState(_ bytes: [UInt8]) {}
}

/// A module's identity, as its descriptor reports it.
public struct ModuleIdentity: Sendable {
  /// The manifest's moduleType; the host refuses a descriptor that disagrees.
  public enum Kind: String, Sendable { case service, ui, app }

  /// Reverse-DNS and stable for the module's life: approvals, storage and licences are keyed on it.
  public var moduleID: String
  /// Service, ui or app, as the manifest says.
  public var kind: Kind
  /// The version, which must equal the manifest's moduleVersion.
  public var major: UInt32
  /// See `major`.
  public var minor: UInt32
  /// See `major`.
  public var patch: UInt32
  /// A prerelease label (`beta.1`), nil for a release.
  public var prerelease: String?

  /// The identity in one line, as `static let identity` wants it.
  public init(_ moduleID: String, kind: Kind, version: (UInt32, UInt32, UInt32), prerelease: String? = nil) {
    self.moduleID = moduleID
    self.kind = kind
    (major, minor, patch) = version
    self.prerelease = prerelease
  }
}

/// UI contributions of a ui or app module.
public struct UIContributionSet: Sendable {
  /// A toolbar button; the host checks its ID against the manifest.
  public struct ToolbarItem: Sendable {
    /// Declared in the manifest's UI contributions.
    public var itemID: String
    /// What the user reads.
    public var title: String
    /// The overlay route it opens, nil for none.
    public var actionRouteID: String?
    /// One item, ID first as in the manifest.
    public init(_ itemID: String, title: String, actionRouteID: String? = nil) {
      self.itemID = itemID
      self.title = title
      self.actionRouteID = actionRouteID
    }
  }

  /// A view injected into a slot the host offers.
  public struct View: Sendable {
    /// Declared in the manifest's UI contributions.
    public var viewID: String
    /// Where the host places it.
    public var slotID: String
    /// Higher first among views in one slot.
    public var priority: Int32
    /// One view, ID first as in the manifest.
    public init(_ viewID: String, slot: String, priority: Int32 = 0) {
      self.viewID = viewID
      slotID = slot
      self.priority = priority
    }
  }

  /// Needs capability `toolbar_items`.
  public var toolbarItems: [ToolbarItem]
  /// Needs capability `view_injection`.
  public var views: [View]
  /// Overlay routes; need capability `routing_overlay`.
  public var routes: [String]
  /// Overlay pointers; need capability `routing_overlay`.
  public var pointers: [String]
  /// A theme mask; needs capability `ui_theme_mask`.
  public var themeID: String?
  /// The mask's colours by token name.
  public var themeTokens: [(name: String, color: String)]

  /// Everything optional, so a module names only what it contributes.
  public init(
    toolbarItems: [ToolbarItem] = [], views: [View] = [], routes: [String] = [], pointers: [String] = [],
    themeID: String? = nil, themeTokens: [(name: String, color: String)] = []
  ) {
    self.toolbarItems = toolbarItems
    self.views = views
    self.routes = routes
    self.pointers = pointers
    self.themeID = themeID
    self.themeTokens = themeTokens
  }
}
