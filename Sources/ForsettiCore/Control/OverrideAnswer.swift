/// The `override` answer for one module or product: what was done (to the persisted override
/// and windows, or to the running host's in-memory override) and, for the persisted ones, what
/// is stored afterwards.
public struct OverrideAnswer: ControlAnswerDocument {
  /// What the order did.
  public enum Change: Sendable, Equatable {
    /// The persisted override set to `state` (`changed`: it was another).
    case set(state: String, changed: Bool)
    /// Cleared: the persisted state that was (nil: none), and the windows removed.
    case clear(persisted: String?, windows: [OverrideWindowLine])
    /// A window added.
    case addWindow(OverrideWindowLine)
    /// The running host's in-memory override, now `state` (nil: cleared).
    case inMemory(state: String?)
  }

  /// What is stored for the ID after a persisted order.
  public struct Stored: Sendable, Equatable {
    public var persisted: String?
    public var windows: [OverrideWindowLine]
    /// Why a window just added does not decide yet, when it does not.
    public var note: String?

    public init(persisted: String?, windows: [OverrideWindowLine], note: String?) {
      self.persisted = persisted
      self.windows = windows
      self.note = note
    }

    /// `persisted off; windows: on from A until B, off from C`, or `nothing`.
    public var text: String {
      var parts: [String] = []
      if let persisted { parts.append("persisted \(persisted)") }
      if !windows.isEmpty { parts.append("windows: " + windows.map(\.text).joined(separator: ", ")) }
      return parts.isEmpty ? "nothing" : parts.joined(separator: "; ")
    }
  }

  public var channel: OverrideOrder.Channel
  public var id: String
  public var change: Change
  /// What was done, in words.
  public var done: String
  /// Nil for an in-memory order.
  public var stored: Stored?

  public init(channel: OverrideOrder.Channel, id: String, change: Change, done: String, stored: Stored?) {
    self.channel = channel
    self.id = id
    self.change = change
    self.done = done
    self.stored = stored
  }

  public var json: JSONValue {
    var o = JSONObject([("channel", .string(channel.rawValue)), ("id", .string(id))])
    switch change {
    case .set(let state, let changed):
      o["action"] = .string("set")
      o["state"] = .string(state)
      o["changed"] = .bool(changed)
    case .clear(let persisted, let windows):
      o["action"] = .string("clear")
      o["clearedPersisted"] = .string(orNull: persisted)
      o["clearedWindows"] = .array(windows.map(\.json))
    case .addWindow(let w):
      o["action"] = .string("addWindow")
      o["window"] = w.json
    case .inMemory(let state):
      o["action"] = .string(state == nil ? "clear" : "set")
      o["inMemory"] = .string(orNull: state)
    }
    o["done"] = .string(done)
    if let stored {
      o["persisted"] = .string(orNull: stored.persisted)
      o["windows"] = .array(stored.windows.map(\.json))
      o["note"] = .string(orNull: stored.note)
    }
    return .object(o)
  }

  public static func decode(_ value: JSONValue) -> Result<OverrideAnswer, ControlError> {
    do throws(ControlError) {
      let o = try AnswerFields(value, "override answer")
      let channelName = try o.string("channel")
      guard let channel = OverrideOrder.Channel(rawValue: channelName) else {
        throw .field("channel", "must be module or product; not '\(channelName)'")
      }
      let action = try o.string("action")
      let change: Change
      if o.value("inMemory") != nil {
        change = .inMemory(state: try o.optionalString("inMemory"))
      } else {
        switch action {
        case "set": change = .set(state: try o.string("state"), changed: try o.bool("changed"))
        case "clear":
          change = .clear(
            persisted: try o.optionalString("clearedPersisted"),
            windows: try OverrideWindowLine.readAll(o.value("clearedWindows"), "clearedWindows"))
        case "addWindow":
          guard let w = o.value("window") else { throw .field("window", "is missing") }
          change = .addWindow(try OverrideWindowLine.read(w))
        default: throw .field("action", "is no override action: '\(action)'")
        }
      }
      var stored: Stored?
      if case .inMemory = change {
      } else {
        stored = Stored(
          persisted: try o.optionalString("persisted"),
          windows: try OverrideWindowLine.readAll(o.value("windows"), "windows"),
          note: try o.optionalString("note"))
      }
      return .success(
        OverrideAnswer(
          channel: channel, id: try o.string("id"), change: change, done: try o.string("done"), stored: stored
        ))
    } catch {
      return .failure(error)
    }
  }
}
