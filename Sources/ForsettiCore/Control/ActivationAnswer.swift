/// The `enable`, `disable` and `select` answer: what was done, in words, and the activation
/// state afterwards (`activation.json`'s form).
public struct ActivationAnswer: ControlAnswerDocument {
  public var state: ActivationState
  /// "enabled com.x", "selected com.ui as the UI module", "no UI module selected".
  public var done: String

  public init(state: ActivationState, done: String) {
    self.state = state
    self.done = done
  }

  /// The state's members, then `done`.
  public var json: JSONValue {
    var o = state.json.objectValue ?? JSONObject()
    o["done"] = .string(done)
    return .object(o)
  }

  public static func decode(_ value: JSONValue) -> Result<ActivationAnswer, ControlError> {
    do throws(ControlError) {
      let o = try AnswerFields(value, "activation answer")
      let done = try o.string("done")
      var members = value.objectValue ?? JSONObject()
      members["done"] = nil
      switch ActivationState.decode(.object(members)) {
      case .success(let state): return .success(ActivationAnswer(state: state, done: done))
      case .failure(let e): throw .field("activation", e.description)
      }
    } catch {
      return .failure(error)
    }
  }
}
