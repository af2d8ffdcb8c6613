/// The `approve` and `revoke` answer: the module and what is approved for it afterwards.
public struct ApprovalAnswer: ControlAnswerDocument {
  public var moduleID: String
  public var approved: [Capability]

  public init(moduleID: String, approved: Set<Capability>) {
    self.moduleID = moduleID
    self.approved = approved.sorted()
  }

  public var json: JSONValue {
    .object(JSONObject([("moduleID", .string(moduleID)), ("approved", .strings(approved.map(\.rawValue)))]))
  }

  public static func decode(_ value: JSONValue) -> Result<ApprovalAnswer, ControlError> {
    do throws(ControlError) {
      let o = try AnswerFields(value, "approval answer")
      var approved = Set<Capability>()
      for name in try o.optionalStrings("approved") {
        guard let c = Capability(rawValue: name) else {
          throw .field("approved", "holds '\(name)', no capability")
        }
        approved.insert(c)
      }
      return .success(ApprovalAnswer(moduleID: try o.string("moduleID"), approved: approved))
    } catch {
      return .failure(error)
    }
  }
}
