import ForsettiTestSupport
import Foundation
import Testing

/// The manual pages `forsetti-host --generate-manual DIR` writes, checked with groff and man.
@Suite(.onTestThreads) struct ManualPageTests {
  let dir = TemporaryDirectory("manual")

  /// The verbs `forsetti-host --help` lists.
  func verbs() throws -> [String] {
    let help = try HostBinary.run(["--help"]).stdout
    let section = help.components(separatedBy: "COMMANDS:\n")[1].components(separatedBy: "\n\n")[0]
    return section.split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) }
      .filter { $0 != "help" }
  }

  @Test func everyVerbHasAPageThatGroffAcceptsAndManRenders() throws {
    let out = dir.url("man1")
    let r = try HostBinary.run(["--generate-manual", out])
    #expect(r.status == 0, "\(r.stderr)")
    let written = r.stdout.split(separator: "\n").map(String.init)
    let verbs = try verbs()
    #expect(verbs.count > 10)
    #expect(Set(written) == Set(([""] + verbs.map { "-" + $0 }).map { "\(out)/forsetti-host\($0).1" }))
    for page in written {
      let groff = try ProcessRunner.run("/usr/bin/groff", ["-man", "-Tutf8", "-ww", "-z", page])
      #expect(groff.status == 0 && groff.stderr.isEmpty, "\(page): \(groff.stderr)")
    }
    // man renders the page; the options appear as typed (ASCII hyphens, unbroken).
    let run = try ProcessRunner.run(
      "/usr/bin/env", ["MANWIDTH=200", "man", "-l", "\(out)/forsetti-host-run.1"])
    #expect(run.status == 0, "\(run.stderr)")
    for text in [
      "NAME", "forsetti-host-run", "SYNOPSIS", "OPTIONS", "--manifests DIR", "--policy POLICY", "Default:",
      "May be given more than once.", "EXIT STATUS", "SEE ALSO", "forsetti-host(1)",
    ] {
      #expect(run.stdout.contains(text), "man output lacks \(text)")
    }
    let overview = try ProcessRunner.run(
      "/usr/bin/env", ["MANWIDTH=200", "man", "-l", "\(out)/forsetti-host.1"])
    for text in ["--generate-completion-script", "--generate-manual", "--version"]
      + verbs.map({ "forsetti-host-\($0)(1)" })
    {
      #expect(overview.stdout.contains(text), "overview lacks \(text)")
    }
  }

  @Test func theOverviewOnStandardOutputIsTheSameEveryRun() throws {
    let a = try HostBinary.run(["--generate-manual"])
    let b = try HostBinary.run(["--generate-manual"])
    #expect(a.status == 0 && a.stdout.hasPrefix(".\\\""))
    #expect(a.stdout == b.stdout)
    let file = try dir.write("forsetti-host.1", a.stdout)
    let groff = try ProcessRunner.run("/usr/bin/groff", ["-man", "-Tutf8", "-ww", "-z", file])
    #expect(groff.stderr.isEmpty, "\(groff.stderr)")
  }
}
