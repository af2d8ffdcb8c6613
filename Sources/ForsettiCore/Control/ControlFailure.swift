/// Why the host did not answer a request: a code a client acts on, one line for a person, and
/// the field at fault with its offending value. The line names fields as the request and the
/// host's configuration do, never as a command line spells them: the host answers the command
/// line, the debug page and applications alike, and each names a field its own way
/// (`message(naming:)`).
public struct ControlFailure: Error, Sendable, Equatable, CustomStringConvertible {
  /// What a client does about a failure: its exit status, whether it asks again.
  public enum Code: String, Sendable, CaseIterable {
    /// The request is malformed, or not what the verb takes (the command line's usage error).
    case usage
    /// No manifest declares the module, or nothing is there to act on.
    case notFound
    /// Not now: too many clients, or the host stopping; ask again.
    case busy
    /// The host will not do it (another user; a setting that forbids it).
    case refused
    /// It was tried and failed (a state file unreadable or unwritable, a module that would not
    /// reload); nothing was acknowledged.
    case failed
    /// The host did not serve the request in time.
    case timedOut
  }

  /// What a failure is about: a field of the request, by its name in docs/control.md, or a
  /// setting of the answering host, by its name in `HostConfiguration`.
  public enum Field: String, Sendable, CaseIterable {
    case module, capabilities, action, channel, id, from, until, persisted, windows, inMemory
    /// `select`'s `none` (no UI module); not `none`, which `Optional` has already.
    case selectNone = "none"
    case stateDirectory, manifestsDirectory, policyFile, entitlementsFile

    /// Whether it is a setting of the host rather than a field of the request.
    public var isSetting: Bool {
      switch self {
      case .stateDirectory, .manifestsDirectory, .policyFile, .entitlementsFile: true
      default: false
      }
    }
  }

  public var code: Code
  /// One line for a person, with the offending value in it.
  public var message: String
  /// The field at fault; nil when the failure is not about one (the host is busy, say).
  public var field: Field?
  /// The offending value of `field` as given, or the path a setting led to; nil for a field
  /// that is at fault only by being there.
  public var value: String?

  /// A failure of `code`, told in `message`, about `field`'s `value`.
  public init(_ code: Code, _ message: String, field: Field? = nil, value: String? = nil) {
    self.code = code
    self.message = message
    self.field = field
    self.value = value
  }

  public var description: String { message }

  /// `value` is not one `field` takes: `invalid value 'V' for 'from': why`.
  public static func invalid(_ field: Field, _ value: String, why: String, code: Code = .usage)
    -> ControlFailure
  {
    ControlFailure(code, invalidLead(field.rawValue, value) + why, field: field, value: value)
  }

  /// What `path`, which the host's `setting` led to, holds or lacks: `stateDirectory PATH: why`.
  /// About that setting, unless the request's `field` is at fault (`value`).
  public static func located(
    _ code: Code, _ setting: Field, _ path: String, _ why: String, field: Field? = nil, value: String? = nil
  ) -> ControlFailure {
    ControlFailure(
      code, "\(setting.rawValue) \(path): \(why)", field: field ?? setting, value: field == nil ? path : value
    )
  }

  private static func invalidLead(_ name: String, _ value: String) -> String {
    "invalid value '\(value)' for '\(name)': "
  }

  /// The message with the fields its forms name (`invalid`, `located`) named by `name`: the
  /// command line passes its options. Any other message is returned as it is.
  public func message(naming name: (Field) -> String) -> String {
    if let field, let value {
      let lead = Self.invalidLead(field.rawValue, value)
      if message.hasPrefix(lead) {
        return Self.invalidLead(name(field), value) + message.dropFirst(lead.count)
      }
    }
    for setting in Field.allCases where setting.isSetting && message.hasPrefix(setting.rawValue + " ") {
      return name(setting) + message.dropFirst(setting.rawValue.count)
    }
    return message
  }

  /// The failure as an answer's `error` member.
  var json: JSONValue {
    var o = JSONObject([("code", .string(code.rawValue)), ("message", .string(message))])
    if let field { o["field"] = .string(field.rawValue) }
    if let value { o["value"] = .string(value) }
    return .object(o)
  }

  /// Reads an answer's `error` member (a host's, untrusted): `code` and `message` strings, and
  /// `field` and `value` strings when present. A code or field this build does not know is read
  /// as `failed` and as none: the message still says what happened.
  static func decode(_ value: JSONValue?) -> Result<ControlFailure, ControlError> {
    guard let e = value?.objectValue, let raw = e["code"]?.stringValue,
      let message = e["message"]?.stringValue
    else { return .failure(.malformed("a refusal without error code and message")) }
    var failure = ControlFailure(Code(rawValue: raw) ?? .failed, message)
    if let f = e["field"] {
      guard let name = f.stringValue else {
        return .failure(.malformed("a refusal whose field is not a string"))
      }
      failure.field = Field(rawValue: name)
    }
    if let v = e["value"] {
      guard let text = v.stringValue else {
        return .failure(.malformed("a refusal whose value is not a string"))
      }
      failure.value = text
    }
    return .success(failure)
  }
}
