/// The `override list` answer: every provider's entries per channel and ID at an instant, and
/// which provider decides now.
public struct OverrideListing: ControlAnswerDocument {
  /// One module's or product's entries.
  public struct Entry: Sendable, Equatable {
    public var id: String
    public var persisted: String?
    /// The running host's in-memory override; nil when none (or when not known).
    public var inMemory: String?
    public var windows: [OverrideWindowLine]
    /// The state that decides now (`unset` when none), and the provider it comes from.
    public var now: String
    public var decidedBy: String?

    public init(
      id: String, persisted: String?, inMemory: String?, windows: [OverrideWindowLine], now: String,
      decidedBy: String?
    ) {
      self.id = id
      self.persisted = persisted
      self.inMemory = inMemory
      self.windows = windows
      self.now = now
      self.decidedBy = decidedBy
    }
  }

  /// The instant of the listing, ISO 8601.
  public var at: String
  /// Whether a running host answered (only it knows its in-memory overrides).
  public var inMemoryKnown: Bool
  public var modules: [Entry]
  public var products: [Entry]

  public init(at: String, inMemoryKnown: Bool, modules: [Entry], products: [Entry]) {
    self.at = at
    self.inMemoryKnown = inMemoryKnown
    self.modules = modules
    self.products = products
  }

  public var json: JSONValue {
    func table(_ entries: [Entry]) -> JSONValue {
      .object(
        JSONObject(
          entries.map { e in
            var o = JSONObject([("persisted", .string(orNull: e.persisted))])
            if inMemoryKnown { o["inMemory"] = .string(orNull: e.inMemory) }
            o["windows"] = .array(e.windows.map(\.json))
            o["now"] = .object(
              JSONObject([("state", .string(e.now)), ("provider", .string(orNull: e.decidedBy))]))
            return (e.id, .object(o))
          }))
    }
    return .object(
      JSONObject([
        ("now", .string(at)), ("inMemoryKnown", .bool(inMemoryKnown)), ("modules", table(modules)),
        ("products", table(products)),
      ]))
  }

  public static func decode(_ value: JSONValue) -> Result<OverrideListing, ControlError> {
    do throws(ControlError) {
      let o = try AnswerFields(value, "override listing")
      func table(_ name: String) throws(ControlError) -> [Entry] {
        guard let members = o.value(name)?.objectValue?.members else {
          throw .field(name, "must be an object")
        }
        return try members.map { (id, value) throws(ControlError) -> Entry in
          let e = try AnswerFields(value, id)
          guard let now = e.value("now") else { throw .field("now", "is missing") }
          let n = try AnswerFields(now, "now")
          return Entry(
            id: id, persisted: try e.optionalString("persisted"), inMemory: try e.optionalString("inMemory"),
            windows: try OverrideWindowLine.readAll(e.value("windows"), "windows"),
            now: try n.string("state"),
            decidedBy: try n.optionalString("provider"))
        }
      }
      return .success(
        OverrideListing(
          at: try o.string("now"), inMemoryKnown: try o.bool("inMemoryKnown"), modules: try table("modules"),
          products: try table("products")))
    } catch {
      return .failure(error)
    }
  }
}
