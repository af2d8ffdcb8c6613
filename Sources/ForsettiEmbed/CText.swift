/// C strings coming in, checked before anything uses them.
enum CText {
  /// The UTF-8 text at `pointer`, or a refusal naming the parameter (NULL, not UTF-8).
  static func read(_ pointer: UnsafePointer<CChar>?, _ name: String) throws(EmbedFailure) -> String {
    guard let pointer else { throw .nullArgument(name) }
    guard let text = String(validatingCString: pointer) else { throw .invalidUTF8(name) }
    return text
  }

  /// As `read`, and not empty.
  static func nonEmpty(_ pointer: UnsafePointer<CChar>?, _ name: String) throws(EmbedFailure) -> String {
    let text = try read(pointer, name)
    guard !text.isEmpty else { throw .invalidValue(name, value: text, why: "must not be empty") }
    return text
  }
}
