/// What a request asks the host, one case per verb, with that verb's typed fields.
public enum ControlCommand: Sendable, Equatable {
  case status
  case list
  case explain(module: String)
  case surface
  /// `capabilities` nil: every capability the manifest requests.
  case approve(module: String, capabilities: [Capability]?)
  /// `capabilities` nil: every approved capability.
  case revoke(module: String, capabilities: [Capability]?)
  case override(OverrideOrder)
  case overrideList
  case enable(module: String)
  case disable(module: String)
  /// `module` nil: no UI module.
  case select(module: String?)
  case reload(module: String)
  /// Become the executable now at the host's path, in the same process (`forsetti-host upgrade`).
  case upgrade

  /// Every verb's name, as the command line spells it (`ControlVerb.all`).
  public static let verbNames = ControlVerb.all.map(\.name)

  /// The verb's name.
  public var verb: String {
    switch self {
    case .status: "status"
    case .list: "list"
    case .explain: "explain"
    case .surface: "surface"
    case .approve: "approve"
    case .revoke: "revoke"
    case .override, .overrideList: "override"
    case .enable: "enable"
    case .disable: "disable"
    case .select: "select"
    case .reload: "reload"
    case .upgrade: "upgrade"
    }
  }

  /// Whether the command writes the state directory (its answer lists the changes it made): its
  /// verb's, but for `override list`, which only reads.
  public var writes: Bool { self != .overrideList && ControlVerb.named(verb)?.writes == true }

  /// The request's `request` object.
  public var json: JSONValue {
    var o = JSONObject([("verb", .string(verb))])
    switch self {
    case .status, .list, .surface, .upgrade: break
    case .explain(let m), .enable(let m), .disable(let m), .reload(let m): o["module"] = .string(m)
    case .approve(let m, let caps), .revoke(let m, let caps):
      o["module"] = .string(m)
      if let caps { o["capabilities"] = .strings(caps.map(\.rawValue)) }
    case .select(let m?): o["module"] = .string(m)
    case .select(nil): o["none"] = .bool(true)
    case .overrideList: o["action"] = .string("list")
    case .override(let order):
      for (k, v) in order.json.members { o[k] = v }
    }
    return .object(o)
  }

  /// Reads a `request` object (untrusted): strict, every field of the verb's type, none other.
  public static func decode(_ value: JSONValue) -> Result<ControlCommand, ControlError> {
    do throws(ControlError) { return .success(try read(value)) } catch { return .failure(error) }
  }

  private static func read(_ value: JSONValue) throws(ControlError) -> ControlCommand {
    guard let o = value.objectValue else { throw .field("request", "must be an object") }
    var f = ControlFields(o)
    let verb = try f.string("verb")
    guard verbNames.contains(verb) else { throw .unknownVerb(verb) }
    let command: ControlCommand
    switch verb {
    case "status": command = .status
    case "list": command = .list
    case "surface": command = .surface
    case "upgrade": command = .upgrade
    case "explain": command = .explain(module: try f.string("module"))
    case "enable": command = .enable(module: try f.string("module"))
    case "disable": command = .disable(module: try f.string("module"))
    case "reload": command = .reload(module: try f.string("module"))
    case "approve", "revoke":
      let module = try f.string("module")
      let caps = try f.capabilities("capabilities")
      command =
        verb == "approve"
        ? .approve(module: module, capabilities: caps) : .revoke(module: module, capabilities: caps)
    case "select":
      let module = try f.optionalString("module")
      let none = try f.optionalBool("none") ?? false
      switch (module, none) {
      case (let m?, false): command = .select(module: m)
      case (nil, true): command = .select(module: nil)
      case (_?, true): throw .field("none", "does not go with \"module\": give one of them")
      case (nil, false): throw .field("module", "is missing (or give \"none\": true)")
      }
    default:
      let action = try f.string("action")
      if action == "list" {
        command = .overrideList
      } else {
        command = .override(try OverrideOrder.read(action: action, &f))
      }
    }
    try f.finish(verb)
    return command
  }
}

/// `override module|product ID on|off|clear`, with its window bounds and flags.
public struct OverrideOrder: Sendable, Equatable {
  /// Where an override is set: a module's own, or a paid product's.
  public enum Channel: String, Sendable, CaseIterable {
    case module, product
  }

  /// What an override order does (`list` is `ControlCommand.overrideList`).
  public enum Action: String, Sendable, CaseIterable {
    case on, off, clear
  }

  public var channel: Channel
  public var id: String
  public var action: Action
  /// ISO 8601 instants of a time-frame window; both nil: the persisted (or in-memory) override.
  public var from: String?
  public var until: String?
  /// With clear: only the persisted override, or only the windows.
  public var persisted: Bool
  public var windows: Bool
  /// The running host's in-memory override (gone when it stops).
  public var inMemory: Bool

  /// An order.
  public init(
    channel: Channel, id: String, action: Action, from: String? = nil, until: String? = nil,
    persisted: Bool = false, windows: Bool = false, inMemory: Bool = false
  ) {
    self.channel = channel
    self.id = id
    self.action = action
    self.from = from
    self.until = until
    self.persisted = persisted
    self.windows = windows
    self.inMemory = inMemory
  }

  var json: JSONObject {
    var o = JSONObject([
      ("action", .string(action.rawValue)), ("channel", .string(channel.rawValue)), ("id", .string(id)),
    ])
    if let from { o["from"] = .string(from) }
    if let until { o["until"] = .string(until) }
    if persisted { o["persisted"] = .bool(true) }
    if windows { o["windows"] = .bool(true) }
    if inMemory { o["inMemory"] = .bool(true) }
    return o
  }

  static func read(action text: String, _ f: inout ControlFields) throws(ControlError) -> OverrideOrder {
    guard let action = Action(rawValue: text) else {
      throw .field("action", "must be one of on, off, clear, list; not '\(text)'")
    }
    let name = try f.string("channel")
    guard let channel = Channel(rawValue: name) else {
      throw .field("channel", "must be module or product; not '\(name)'")
    }
    return OverrideOrder(
      channel: channel, id: try f.string("id"), action: action, from: try f.optionalString("from"),
      until: try f.optionalString("until"), persisted: try f.optionalBool("persisted") ?? false,
      windows: try f.optionalBool("windows") ?? false, inMemory: try f.optionalBool("inMemory") ?? false)
  }
}

/// The fields of a request object, read one by one; `finish` refuses any left unread.
struct ControlFields {
  private let object: JSONObject
  private var read: Set<String> = []

  init(_ object: JSONObject) { self.object = object }

  mutating func optionalString(_ name: String) throws(ControlError) -> String? {
    read.insert(name)
    guard let v = object[name] else { return nil }
    guard let s = v.stringValue else { throw .field(name, "must be a string, not \(v.typeName)") }
    guard !s.isEmpty, s.utf8.count <= ControlRequest.maxString else {
      throw .field(name, "must be a string of 1 to \(ControlRequest.maxString) bytes")
    }
    return s
  }

  mutating func string(_ name: String) throws(ControlError) -> String {
    guard let s = try optionalString(name) else { throw .field(name, "is missing") }
    return s
  }

  mutating func optionalBool(_ name: String) throws(ControlError) -> Bool? {
    read.insert(name)
    guard let v = object[name] else { return nil }
    guard let b = v.boolValue else { throw .field(name, "must be true or false, not \(v.typeName)") }
    return b
  }

  mutating func capabilities(_ name: String) throws(ControlError) -> [Capability]? {
    read.insert(name)
    guard let v = object[name] else { return nil }
    guard let list = v.arrayValue, list.count <= ControlRequest.maxList else {
      throw .field(name, "must be an array of at most \(ControlRequest.maxList) capability names")
    }
    var out: [Capability] = []
    for item in list {
      guard let s = item.stringValue, let c = Capability(rawValue: s) else {
        let shown = item.stringValue.map { "'\(ModuleText.visible(String($0.prefix(64))))'" } ?? item.typeName
        throw .field(
          name,
          "holds \(shown), which is no capability (\(Capability.allCases.map(\.rawValue).joined(separator: ", ")))"
        )
      }
      out.append(c)
    }
    return out
  }

  /// Refuses a field the verb does not take.
  func finish(_ verb: String) throws(ControlError) {
    if let extra = object.members.map(\.key).first(where: { !read.contains($0) }) {
      throw .field(extra, "is not a field of \(verb)")
    }
  }
}
