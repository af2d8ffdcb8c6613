/// A time-frame window as an override answer shows it: its state and bounds, and in a listing
/// where it stands now.
public struct OverrideWindowLine: Sendable, Equatable {
  /// Where a window stands at an instant.
  public enum Status: String, Sendable, CaseIterable {
    case inEffect, notYet, ended

    /// How the listing says it.
    public var text: String {
      switch self {
      case .inEffect: "in effect"
      case .notYet: "not yet in effect"
      case .ended: "ended"
      }
    }
  }

  /// `on` or `off`.
  public var state: String
  public var from: String?
  public var until: String?
  /// In a listing only.
  public var status: Status?

  public init(state: String, from: String?, until: String?, status: Status? = nil) {
    self.state = state
    self.from = from
    self.until = until
    self.status = status
  }

  /// `on from 2027-01-01T00:00:00Z until 2027-02-01T00:00:00Z`.
  public var text: String {
    ([state] + [from.map { "from \($0)" }, until.map { "until \($0)" }].compactMap { $0 }).joined(
      separator: " ")
  }

  public var json: JSONValue {
    var o = JSONObject([
      ("state", .string(state)), ("from", .string(orNull: from)), ("until", .string(orNull: until)),
    ])
    if let status {
      o["inEffect"] = .bool(status == .inEffect)
      o["status"] = .string(status.rawValue)
    }
    return .object(o)
  }

  static func read(_ value: JSONValue) throws(ControlError) -> OverrideWindowLine {
    let o = try AnswerFields(value, "window")
    var status: Status?
    if let raw = try o.optionalString("status") {
      guard let s = Status(rawValue: raw) else { throw .field("status", "is no window status: '\(raw)'") }
      status = s
    }
    return OverrideWindowLine(
      state: try o.string("state"), from: try o.optionalString("from"), until: try o.optionalString("until"),
      status: status)
  }

  static func readAll(_ value: JSONValue?, _ name: String) throws(ControlError) -> [OverrideWindowLine] {
    guard let items = value?.arrayValue else { throw .field(name, "must be an array of windows") }
    return try items.map { (item) throws(ControlError) in try read(item) }
  }
}
