/// Words quoted for the shells the completion scripts are written in.
enum ShellQuote {
  /// `'…'` for bash and zsh: nothing inside is special but the quote itself, written `'\''`.
  static func single(_ s: String) -> String {
    "'" + s.replacing("'", with: "'\\''") + "'"
  }

  /// `'…'` for fish, where a backslash before `'` or `\` inside single quotes escapes it.
  static func fish(_ s: String) -> String {
    "'" + s.replacing("\\", with: "\\\\").replacing("'", with: "\\'") + "'"
  }
}
