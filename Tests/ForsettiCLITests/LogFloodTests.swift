import ForsettiTestSupport
import Foundation
import Testing

/// A module flooding its log call, its standard output and telemetry for ten seconds, under a
/// real host run as root and as an unprivileged user: the logs stay bounded, the drops are
/// counted, and the module beside it loses nothing.
@Suite(.onTestThreads) struct LogFloodTests {
  @Test(arguments: HostileHost.Identity.allCases)
  func aTenSecondFloodLeavesUnder32MiBOfLogs(as identity: HostileHost.Identity) throws {
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    try h.install(FloodFixtures.flooder(seconds: 10), capabilities: ["telemetry"])
    try h.install(FloodFixtures.ticker(count: 10))
    let run = try h.run(for: 11.5)
    #expect(!run.killedByWatchdog, "\(run.output.suffix(2000))")
    #expect(run.status == 0, "\(run.output.suffix(2000))")

    let logs = h.dir.url("state/logs")
    let names = (try? FileManager.default.contentsOfDirectory(atPath: logs)) ?? []
    let bytes = names.reduce(0) { sum, name in
      sum + ((try? FileManager.default.attributesOfItem(atPath: logs + "/" + name)[.size] as? Int) ?? 0)
    }
    #expect(names.contains("host.log"), "\(names)")
    #expect(bytes < 32 << 20, "\(bytes) bytes of logs in \(names)")
    let hostLog = (try? String(contentsOfFile: logs + "/host.log", encoding: .utf8)) ?? ""
    #expect(hostLog.contains("[module=com.test.flood] flood log "))
    #expect(hostLog.contains("[module=com.test.flood dropped="), "no dropped-lines line")
    for i in 0..<10 {
      #expect(hostLog.contains("[module=com.test.healthy] tick \(i)\n"), "tick \(i) missing")
    }
  }
}
