import CForsetti

/// What a Swift module author implements. The SDK turns it into forsetti.h's C tables; the
/// host never sees a Swift type.
///
/// `start` and `stop` are called once each, on the host's main thread. Throwing from `start`
/// refuses to start (the host records `startFailed` and does not call `stop`).
public protocol ForsettiModule: AnyObject {
  /// Who the module is; must agree with its manifest (moduleID, moduleType, moduleVersion).
  static var identity: ModuleIdentity { get }
  init()
  func start(_ host: Host) throws(ForsettiError)
  func stop()
  /// UI contributions (ui and app modules); checked against the manifest before `start`.
  var uiContributions: UIContributionSet? { get }
  /// Hot reload: the state to hand to the next version, or nil.
  func saveState() -> [UInt8]?
  /// Hot reload: the state the previous version saved, after `start`.
  func restoreState(_ bytes: [UInt8])
}

extension ForsettiModule {
  public var uiContributions: UIContributionSet? { nil }
  public func saveState() -> [UInt8]? { nil }
  public func restoreState(_ bytes: [UInt8]) {}
}

/// A module's identity, as its descriptor reports it.
public struct ModuleIdentity: Sendable {
  public enum Kind: String, Sendable { case service, ui, app }

  public var moduleID: String
  public var kind: Kind
  public var major: UInt32
  public var minor: UInt32
  public var patch: UInt32
  public var prerelease: String?

  public init(_ moduleID: String, kind: Kind, version: (UInt32, UInt32, UInt32), prerelease: String? = nil) {
    self.moduleID = moduleID
    self.kind = kind
    (major, minor, patch) = version
    self.prerelease = prerelease
  }
}

/// UI contributions of a ui or app module.
public struct UIContributionSet: Sendable {
  public struct ToolbarItem: Sendable {
    public var itemID: String
    public var title: String
    public var actionRouteID: String?
    public init(_ itemID: String, title: String, actionRouteID: String? = nil) {
      self.itemID = itemID
      self.title = title
      self.actionRouteID = actionRouteID
    }
  }

  public struct View: Sendable {
    public var viewID: String
    public var slotID: String
    public var priority: Int32
    public init(_ viewID: String, slot: String, priority: Int32 = 0) {
      self.viewID = viewID
      slotID = slot
      self.priority = priority
    }
  }

  public var toolbarItems: [ToolbarItem]
  public var views: [View]
  public var routes: [String]
  public var pointers: [String]
  public var themeID: String?
  public var themeTokens: [(name: String, color: String)]

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
