/// A verb's answer, typed both ways: the host builds it and sends `json`; a client reads the
/// line with `decode`, which refuses a member missing or of the wrong type by name, and renders
/// the value, never the document.
public protocol ControlAnswerDocument: Sendable, Equatable {
  /// The answer document (the verb's `--json`; its schema is the verb's, docs/control.md).
  var json: JSONValue { get }
  /// Reads a host's answer document.
  static func decode(_ value: JSONValue) -> Result<Self, ControlError>
}

extension StatusAnswer: ControlAnswerDocument {}
extension ListAnswer: ControlAnswerDocument {}
extension ExplainAnswer: ControlAnswerDocument {}
