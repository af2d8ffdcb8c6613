import ForsettiTestSupport
import Foundation
import Testing

/// The completion scripts `forsetti-host --generate-completion-script` prints, loaded into the
/// real shells and asked to complete as a user's TAB would.
@Suite(.onTestThreads) struct CompletionTests {
  let dir = TemporaryDirectory("completion")

  func script(_ shell: String) throws -> String {
    let r = try HostBinary.run(["--generate-completion-script", shell])
    #expect(r.status == 0, "\(r.stderr)")
    return try dir.write("completion.\(shell)", r.stdout)
  }

  /// The shell's path; a missing shell fails the test with what to install (CI installs them).
  func shell(_ name: String) throws -> String {
    let path = "/usr/bin/\(name)"
    try #require(
      FileManager.default.isExecutableFile(atPath: path),
      "\(name) is not installed: apt-get install -y \(name)")
    return path
  }

  /// What bash's completion function offers for `words` (the last one is being completed).
  func bashComplete(_ file: String, _ words: [String]) throws -> [String] {
    let quoted = words.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(
      separator: " ")
    let program = """
      source \(file) || exit 9
      complete -p forsetti-host >/dev/null || exit 8
      COMP_WORDS=(\(quoted)); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMPREPLY=()
      _forsetti_host
      printf '%s\\n' "${COMPREPLY[@]}"
      """
    let r = try ProcessRunner.run(try shell("bash"), ["--norc", "--noprofile", "-c", program], in: dir.path)
    #expect(r.status == 0, "\(r.stderr)")
    return r.stdout.split(separator: "\n").map(String.init)
  }

  @Test func bashCompletesVerbsOptionsValuesAndHelp() throws {
    let file = try script("bash")
    try FileManager.default.createDirectory(atPath: dir.url("plugins"), withIntermediateDirectories: true)
    try dir.write("counter.so", "")
    try dir.write("notes.txt", "")
    let registered = try ProcessRunner.run(
      try shell("bash"), ["--norc", "-c", "source \(file) && complete -p forsetti-host"])
    #expect(
      registered.status == 0 && registered.stdout.contains("-F _forsetti_host forsetti-host"), "\(registered)"
    )
    #expect(try bashComplete(file, ["forsetti-host", "ru"]) == ["run"])
    #expect(try bashComplete(file, ["forsetti-host", "run", "--pol"]) == ["--policy"])
    #expect(try bashComplete(file, ["forsetti-host", "new", "--lang", ""]) == ["c", "swift"])
    #expect(try bashComplete(file, ["forsetti-host", "help", "ch"]) == ["check"])
    #expect(
      try bashComplete(file, ["forsetti-host", "--generate-completion-script", ""]) == [
        "bash", "zsh", "fish",
      ])
    #expect(
      try bashComplete(file, ["forsetti-host", "override", "module", "x", ""]) == ["on", "off", "clear"])
    // Directories only for DIR; FILE.so offers .so files (and directories to walk into).
    let manifests = try bashComplete(file, ["forsetti-host", "check", "--manifests", ""])
    #expect(manifests.contains("plugins") && !manifests.contains("notes.txt"), "\(manifests)")
    #expect(try bashComplete(file, ["forsetti-host", "check", "--manifests", "=", ""]) == manifests)
    let so = try bashComplete(file, ["forsetti-host", "sign", ""])
    #expect(so.contains("counter.so") && !so.contains("notes.txt"), "\(so)")
  }

  @Test func zshParsesItsScript() throws {
    let r = try ProcessRunner.run(try shell("zsh"), ["-n", try script("zsh")])
    #expect(r.status == 0, "\(r.stderr)")
    #expect(try String(contentsOfFile: script("zsh"), encoding: .utf8).hasPrefix("#compdef forsetti-host\n"))
  }

  @Test func fishParsesAndCompletesVerbsAndChoices() throws {
    let file = try script("fish")
    let fish = try shell("fish")
    let parsed = try ProcessRunner.run(fish, ["--no-execute", file])
    #expect(parsed.status == 0, "\(parsed.stderr)")
    let verbs = try ProcessRunner.run(
      fish, ["--no-config", "-c", "source \(file); complete --do-complete 'forsetti-host ru'"])
    #expect(verbs.stdout.split(separator: "\n").map { $0.prefix { $0 != "\t" } } == ["run"], "\(verbs)")
    let lang = try ProcessRunner.run(
      fish, ["--no-config", "-c", "source \(file); complete --do-complete 'forsetti-host new --lang '"])
    #expect(lang.stdout.split(separator: "\n").map { $0.prefix { $0 != "\t" } } == ["c", "swift"], "\(lang)")
  }

  @Test func anUnknownShellIsAUsageError() throws {
    let r = try HostBinary.run(["--generate-completion-script", "tcsh"])
    #expect(r.status == 2)
    #expect(r.stderr.contains("'tcsh'") && r.stderr.contains("bash, zsh, fish"), "\(r.stderr)")
  }
}
