import ForsettiTestSupport
import Foundation
import Testing

/// The zygote is supervised (`WorkerSource.swift`): against a real `forsetti-host run`, as root
/// and as an unprivileged user, a zygote stopped (SIGSTOP) or killed while modules need new
/// workers is replaced, every module still starts, and the host's log says what happened.
@Suite(.onTestThreads, .serialized) struct ZygoteSupervisionTests {
  static func module(_ id: String) -> ModuleFixture {
    var f = ModuleFixture(moduleID: id, entryPoint: id.replacingOccurrences(of: ".", with: "_") + "_entry")
    f.start = "fixture_log(\"up\"); return FORSETTI_OK;"
    return f
  }

  static let ids = ["com.test.first", "com.test.second"]

  /// The host's output so far.
  static func text(_ h: HostileHost) -> String {
    (try? String(contentsOfFile: h.dir.url("host-output.txt"), encoding: .utf8)) ?? ""
  }

  /// How many times `id` logged that it started.
  static func starts(_ id: String, in text: String) -> Int {
    text.components(separatedBy: "[module=\(id)] up").count - 1
  }

  @Test(arguments: HostileHost.Identity.allCases, [SIGSTOP, SIGKILL])
  func aZygoteStoppedOrKilledDuringStartsIsReplacedAndEveryModuleStarts(
    as identity: HostileHost.Identity, signal: Int32
  ) throws {
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    for id in Self.ids { try h.install(Self.module(id)) }
    let run = try h.run(
      for: 120,
      ready: { Self.ids.allSatisfy { Self.starts($0, in: Self.text(h)) == 1 } },
      observe: { host in
        var seen: [String: String] = [:]
        defer { kill(host, SIGTERM) }
        guard let zygote = WorkerEnvironmentTests.children(of: host, endingWith: "--zygote").first else {
          return ["error": "no zygote"]
        }
        seen["zygote"] = String(zygote)
        // Every worker ends: each module is restarted, needing a new worker from the zygote.
        kill(zygote, signal)
        for worker in WorkerEnvironmentTests.children(of: host, endingWith: "--worker") {
          kill(worker, SIGKILL)
        }
        // Until both have started again (or a generous minute passed: a finding, not a hang).
        let end = Date().addingTimeInterval(60)
        while Date() < end, !Self.ids.allSatisfy({ Self.starts($0, in: Self.text(h)) >= 2 }) {
          usleep(20_000)
        }
        return seen
      })
    #expect(run.status == 0, "\(run.output)")
    let zygote = try #require(run.observed?["zygote"], "\(String(describing: run.observed)) \(run.output)")
    for id in Self.ids {
      #expect(Self.starts(id, in: run.output) >= 2, "\(id) did not start again: \(run.output)")
    }
    // One line says the zygote was replaced, naming why and its successor.
    let why = signal == SIGSTOP ? "did not answer within 1.0 s" : "had ended"
    let replaced = run.hostLines.filter {
      $0.contains("zygote pid \(zygote) \(why)") && $0.contains(": replaced by zygote pid ")
    }
    #expect(replaced.count == 1, "\(run.hostLines)")
    let successor = replaced.first.flatMap { $0.components(separatedBy: "replaced by zygote pid ").last }
    #expect(successor.flatMap { Int32($0.prefix { $0.isNumber }) }.map { String($0) != zygote } == true)
    // Nothing fell back to spawning: the replacement forked the workers.
    #expect(!run.output.contains("posix_spawn"), "\(run.hostLines)")
  }
}
