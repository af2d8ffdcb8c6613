import ForsettiTestSupport
import Foundation
import Testing

/// A SIGTERM is never lost, however early in the host's start it comes: systemd's `stop` right
/// after `start` must stop the host, not leave it running until `--for`.
@Suite(.onTestThreads) struct SignalAtStartTests {
  let dir = TemporaryDirectory("signal-at-start")

  /// SIGTERMs sent at moments spread over the host's whole start: each host ends, by the signal
  /// (before its handler exists) or cleanly; none keeps running. The positive control is the
  /// host that gets no signal and is still running after all the others ended.
  @Test(.timeLimit(.minutes(5))) func aSigtermAtAnyMomentOfTheStartStopsTheHost() throws {
    var f = ModuleFixture(moduleID: "com.test.early", entryPoint: "early_entry")
    f.start = "fixture_log(\"hello from early\"); return FORSETTI_OK;"
    try f.install(in: dir, name: "early_entry", capabilities: [])
    func launch(_ n: Int) throws -> Process {
      let p = Process()
      p.executableURL = URL(fileURLWithPath: HostBinary.path)
      p.arguments = [
        "run", "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state",
        dir.url("state-\(n)"), "--approve-all", "--for", "600",
      ]
      p.standardOutput = FileHandle.nullDevice
      p.standardError = FileHandle.nullDevice
      try p.run()
      return p
    }
    let control = try launch(0)
    defer { if control.isRunning { kill(control.processIdentifier, SIGKILL) } }
    // Delays from 0 to ~60 ms in 2 ms steps, then a few later ones: the window between the
    // host's first instruction and its handler being in place is somewhere in there.
    let delays = Array(stride(from: 0, through: 60_000, by: 2_000)) + [100_000, 200_000, 400_000]
    var stuck: [Int] = []
    for (i, delay) in delays.enumerated() {
      let host = try launch(i + 1)
      usleep(useconds_t(delay))
      kill(host.processIdentifier, SIGTERM)
      // Generous: a loaded machine is slow to stop a host, never 120 s slow.
      let end = Date().addingTimeInterval(120)
      while host.isRunning && Date() < end { usleep(10_000) }
      if host.isRunning {
        stuck.append(delay)
        kill(host.processIdentifier, SIGKILL)
      }
      host.waitUntilExit()
    }
    #expect(
      stuck.isEmpty, "hosts still running 120 s after a SIGTERM sent this many µs after launch: \(stuck)")
    #expect(control.isRunning, "the host given no signal should still run (--for 600)")
  }
}
