/// A shell `forsetti-host --generate-completion-script` writes a script for.
enum CompletionShell: String, CaseIterable, Sendable {
  case bash, zsh, fish

  /// The completion script for `program`, generated from its declarations.
  func script(for program: ProgramSpec) -> String {
    switch self {
    case .bash: BashCompletion.script(program)
    case .zsh: ZshCompletion.script(program)
    case .fish: FishCompletion.script(program)
    }
  }
}
