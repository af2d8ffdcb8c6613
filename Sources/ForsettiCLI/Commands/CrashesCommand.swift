import ForsettiCore
import ForsettiRuntime
import Glibc

/// `forsetti-host crashes [MODULE]`: the crash reports kept under the state directory
/// (`CrashStore`), newest last, each with its signal, the faulting address and the crashing
/// thread's frames.
enum CrashesCommand {
  static let spec = CommandSpec(
    name: "crashes",
    abstract: "Show the crash reports kept for each module (or one), with where each crashed.",
    discussion: """
      When a module's worker dies of a signal, the host writes a report: the signal and its
      cause, the faulting address and the file it is in, and the crashing thread's frames, each
      as FILE+0xOFFSET with the file's build ID, the function and FILE.c:LINE where the binary
      has DWARF (else the nearest symbol). The newest \\(CrashStore.kept) per module are kept under
      STATE/crashes/MODULE/; this prints them, oldest first. Reads files only: no host needs to
      be running.

      EXIT STATUS:
        0  reports printed (or none kept)
        2  usage error
      """,
    options: [.state("State directory."), .flag("json", "Print JSON instead of text.")],
    positionals: [
      PositionalSpec("MODULE", "The module whose reports to show (all when left out).", optional: true)
    ])

  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    let store = CrashStore(stateDirectory: p.stateDirectory)
    let modules = p.positionals.first.map { [$0] } ?? store.modules
    let reports = modules.flatMap { store.reports(of: $0) }
    if p.flag("json") {
      console.out(
        JSONWriter.string(.object(JSONObject([("crashes", .array(reports.map(\.json)))])), pretty: true)
          + "\n")
      return .success
    }
    guard !reports.isEmpty else {
      console.out("no crash reports kept in \(store.directory)\n")
      return .success
    }
    for r in reports { console.out("\(when(r.time))  \(r.text)\n\n") }
    return .success
  }

  /// "2026-12-07 11:52:03 UTC".
  static func when(_ time: Int64) -> String {
    var t = time_t(time)
    var parts = tm()
    gmtime_r(&t, &parts)
    var buffer = [CChar](repeating: 0, count: 32)
    _ = strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M:%S UTC", &parts)
    return String(cString: buffer)
  }
}
