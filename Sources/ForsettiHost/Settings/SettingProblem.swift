/// A setting a host refuses: which one (the configuration's own name, `isolation.maxRestarts`),
/// the value as it was given, and what would be accepted.
public struct SettingProblem: Error, Sendable, Hashable, CustomStringConvertible {
  /// The field of `ForsettiHost.Configuration`, as a path: `logLimits.linesPerSecond`.
  public var setting: String
  /// The value refused, as given (text) or as held (a number in the field's own unit).
  public var value: String
  /// What would be accepted: "at most 16 TiB", "expected a non-negative number".
  public var why: String

  public init(setting: String, value: String, why: String) {
    self.setting = setting
    self.value = value
    self.why = why
  }

  public var description: String { "\(setting) '\(value)': \(why)" }
}
