/// The `surface` answer: the UI surface a host published (`surface.json`), and whether that host
/// still runs; no surface when none was published.
public struct SurfaceAnswer: ControlAnswerDocument {
  /// A toolbar item and the module that contributed it.
  public struct Toolbar: Sendable, Equatable {
    public var moduleID: String
    public var itemID: String
    public var title: String
  }

  /// A view injected into a slot, and the module that contributed it.
  public struct View: Sendable, Equatable {
    public var moduleID: String
    public var viewID: String
    public var slotID: String
    public var priority: Int
  }

  /// What a host published.
  public struct Published: Sendable, Equatable {
    /// The host that published it.
    public var pid: Int32
    public var toolbarItems: [Toolbar]
    public var viewInjections: [View]
    public var routes: [String]
    /// A theme mask a module tried to set, validated and stripped.
    public var strippedThemeID: String?
    /// The document as published (its schema is docs/control.md's), for `--json`.
    public var document: JSONObject
  }

  public var running: Bool
  public var published: Published?

  public init(running: Bool, published: Published?) {
    self.running = running
    self.published = published
  }

  public var json: JSONValue {
    guard var o = published?.document else {
      return .object(JSONObject([("running", .bool(false)), ("surface", .null)]))
    }
    o["running"] = .bool(running)
    return .object(o)
  }

  /// The published document (`surface.json`) read as what it shows; nil when it holds no pid.
  public static func published(_ document: JSONObject) throws(ControlError) -> Published? {
    let o = try AnswerFields(.object(document), "surface")
    guard o.value("pid") != nil else { return nil }
    guard let pid = Int32(exactly: try o.integer("pid")) else { throw .field("pid", "is not a process ID") }
    func items(_ name: String) throws(ControlError) -> [AnswerFields] {
      guard let v = o.value(name), !v.isNull else { return [] }
      guard let list = v.arrayValue else { throw .field(name, "must be an array") }
      return try list.map { (item) throws(ControlError) in try AnswerFields(item, name) }
    }
    let toolbar = try items("toolbarItems").map { (t) throws(ControlError) in
      Toolbar(
        moduleID: try t.string("moduleID"), itemID: try t.string("itemID"), title: try t.string("title"))
    }
    let views = try items("viewInjections").map { (v) throws(ControlError) in
      View(
        moduleID: try v.string("moduleID"), viewID: try v.string("viewID"), slotID: try v.string("slotID"),
        priority: try v.integer("priority"))
    }
    var routes: [String] = []
    if let overlay = o.value("overlay"), !overlay.isNull {
      routes = try AnswerFields(overlay, "overlay").optionalStrings("routes")
    }
    return Published(
      pid: pid, toolbarItems: toolbar, viewInjections: views, routes: routes,
      strippedThemeID: try o.optionalString("strippedThemeID"), document: document)
  }

  public static func decode(_ value: JSONValue) -> Result<SurfaceAnswer, ControlError> {
    do throws(ControlError) {
      let o = try AnswerFields(value, "surface answer")
      var document = value.objectValue ?? JSONObject()
      document["running"] = nil
      return .success(SurfaceAnswer(running: try o.bool("running"), published: try published(document)))
    } catch {
      return .failure(error)
    }
  }
}
