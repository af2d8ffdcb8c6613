/// Every check of a verb's settings run, so that a configuration file (or a command line) with
/// several bad values is told all of them at once: each check's failure is kept and the next
/// one still runs.
struct SettingChecks {
  private(set) var failures: [CommandFailure] = []

  /// The value `check` gives, or nil after keeping its failure.
  mutating func run<T>(_ check: () throws(CommandFailure) -> T) -> T? {
    do throws(CommandFailure) {
      return try check()
    } catch {
      failures.append(error)
      return nil
    }
  }

  /// Throws what failed: the one failure, or all of them in the order they were checked.
  func finish() throws(CommandFailure) {
    if failures.count == 1 { throw failures[0] }
    if failures.count > 1 { throw .several(failures) }
  }
}
