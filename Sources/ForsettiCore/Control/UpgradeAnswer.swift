/// The `upgrade` answer of the image that hands over: the executable it passed the preflight of
/// and will become, both versions, and the upgrade's token, which the new image's `status`
/// shows (`StatusAnswer.Image.upgradeToken`) once it serves.
public struct UpgradeAnswer: ControlAnswerDocument {
  public var token: String
  public var executable: String
  public var fromVersion: String
  public var toVersion: String

  public init(token: String, executable: String, fromVersion: String, toVersion: String) {
    self.token = token
    self.executable = executable
    self.fromVersion = fromVersion
    self.toVersion = toVersion
  }

  public var json: JSONValue {
    .object(
      JSONObject([
        ("token", .string(token)), ("executable", .string(executable)), ("fromVersion", .string(fromVersion)),
        ("toVersion", .string(toVersion)),
      ]))
  }

  /// Reads a host's answer; a member missing or of the wrong type is refused by name.
  public static func decode(_ value: JSONValue) -> Result<UpgradeAnswer, ControlError> {
    do throws(ControlError) {
      let o = try AnswerFields(value, "upgrade answer")
      return .success(
        UpgradeAnswer(
          token: try o.string("token"), executable: try o.string("executable"),
          fromVersion: try o.string("fromVersion"), toVersion: try o.string("toVersion")))
    } catch {
      return .failure(error)
    }
  }
}
