import ForsettiCore

/// What is wrong with an override order in itself, whatever the state holds: each case names the
/// request's field at fault and its value. The host says it in the request's terms (`failure`);
/// the command line checks its arguments the same way before it sends them, and says it in its
/// options'.
package enum OverrideOrderError: Error, Sendable, Equatable {
  /// `persisted` or `windows` with an action other than `clear`.
  case onlyWithClear(ControlFailure.Field)
  /// A field given with `inMemory`, which takes no window and clears only the override itself.
  case notWithInMemory(ControlFailure.Field, value: String)
  /// `from` or `until` that is not an ISO 8601 instant.
  case notAnInstant(ControlFailure.Field, String)
  /// `until` not after `from`.
  case untilNotAfterFrom(from: String, until: String)

  /// What a bound must be, said to whoever gave something else.
  package static let instantExpected = "expected an ISO 8601 instant such as 2027-01-01T00:00:00Z"

  /// Refuses an order no state could make right, its first fault in the order of the fields.
  package static func check(_ order: OverrideOrder) throws(OverrideOrderError) {
    let bounds: [(ControlFailure.Field, String?)] = [(.from, order.from), (.until, order.until)]
    let flags: [(ControlFailure.Field, Bool)] = [(.persisted, order.persisted), (.windows, order.windows)]
    if order.inMemory {
      let given = bounds.compactMap { f, v in v.map { (f, $0) } } + flags.filter(\.1).map { ($0.0, "true") }
      if let (field, value) = given.first { throw .notWithInMemory(field, value: value) }
      return
    }
    if order.action != .clear, let (field, _) = flags.first(where: \.1) { throw .onlyWithClear(field) }
    for case (let field, let value?) in bounds where Licence.parseTime(value) == nil {
      throw .notAnInstant(field, value)
    }
    if let from = order.from, let until = order.until, let f = Licence.parseTime(from),
      let u = Licence.parseTime(until), f >= u
    {
      throw .untilNotAfterFrom(from: from, until: until)
    }
  }

  /// The host's failure for this fault, naming the request's fields.
  package var failure: ControlFailure {
    switch self {
    case .onlyWithClear(let field):
      ControlFailure(.usage, "\"\(field.rawValue)\" goes only with action clear", field: field, value: "true")
    case .notWithInMemory(let field, let value):
      ControlFailure(
        .usage, "\"\(field.rawValue)\" does not go with \"inMemory\"", field: field, value: value)
    case .notAnInstant(let field, let value): .invalid(field, value, why: Self.instantExpected)
    case .untilNotAfterFrom(let from, let until):
      .invalid(.until, until, why: "expected an instant after \"from\" (\(from))")
    }
  }
}
