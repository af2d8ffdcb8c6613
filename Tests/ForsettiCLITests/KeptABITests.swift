import ForsettiTestSupport
import Foundation
import Testing

/// ABI 1.3 (issue 39) grew `forsetti_role_service` and added FORSETTI_ERR_BUSY: modules built for
/// ABI 1.0–1.2 must load and serve unchanged. Two modules built once against the ABI 1.2 headers
/// and kept as binaries (`Tests/Fixtures/abi-1.2`, its README says how), never rebuilt: a
/// shared_database provider serving with `serve` and a consumer calling it from three threads,
/// run through a real `forsetti-host run`, as root and as uid 65534.
@Suite(.onTestThreads) struct KeptABITests {
  typealias F = RoleLoadFixtures

  static let provider = "com.test.kept.db"
  static let consumer = "com.test.kept.app"

  static func kept(_ relative: String) -> String {
    (F.keptDirectory as NSString).appendingPathComponent(relative)
  }

  /// The snapshot is what it says: the headers of ABI 1.2, without what 1.3 added, and the two
  /// kept binaries beside their sources.
  @Test func theKeptHeadersAreThoseOfABI12AndTheBinariesAreThere() throws {
    let version = try String(contentsOfFile: Self.kept("include/forsetti/version.h"), encoding: .utf8)
    #expect(version.contains("#define FORSETTI_ABI_MINOR 2u"))
    let roles = try String(contentsOfFile: Self.kept("include/forsetti/services/roles.h"), encoding: .utf8)
    #expect(roles.contains("(*serve)(forsetti_role_handler handler, void *context);"))
    #expect(!roles.contains("serve_concurrently") && !roles.contains("time_left_ns"))
    let status = try String(contentsOfFile: Self.kept("include/forsetti/status.h"), encoding: .utf8)
    #expect(!status.contains("FORSETTI_ERR_BUSY"))
    // Control: the headers of this package are those of a later minor, with what 1.3 added.
    let current = try String(
      contentsOfFile: ModuleFixture.includeDirectory + "/forsetti/services/roles.h", encoding: .utf8)
    #expect(current.contains("serve_concurrently"))
    for name in ["kept_db", "kept_app"] {
      #expect(FileManager.default.fileExists(atPath: Self.kept("bin/\(name).so")), "\(name).so")
      let source = try String(contentsOfFile: Self.kept("src/\(name).c"), encoding: .utf8)
      #expect(source.contains("FORSETTI_ABI_MINOR == 2"), "\(name).c asserts the ABI it was built for")
    }
  }

  /// The kept provider serves and the kept consumer is answered: nine calls from three threads
  /// at once, each answered OK with its own request. The provider, written for one call at a
  /// time, still sees one at a time (`max_inside=1` on every call; the same measure sees 8 for a
  /// provider declaring 8, `RoleLoadTests`). Nobody crashes.
  @Test(.timeLimit(.minutes(3)), arguments: HostileHost.Identity.allCases)
  func abi12ModulesLoadServeAndCallUnchanged(as identity: HostileHost.Identity) throws {
    let host = HostileHost(identity)
    try #require(host.isAvailable, "running as another user needs root")
    try F.installKept(
      "kept_db", moduleID: Self.provider, entryPoint: "kept_db_entry", in: host.dir,
      capabilities: ["shared_database"], manifestExtra: F.holds("shared_database"))
    try F.installKept(
      "kept_app", moduleID: Self.consumer, entryPoint: "kept_app_entry", in: host.dir,
      capabilities: ["shared_database"], manifestExtra: F.consumesSharedDatabase)
    let run = try host.run(for: 60, stopWhen: { $0.contains("[module=\(Self.consumer)] kept done ") })
    let app = run.lines(Self.consumer)
    #expect(app.contains("kept done ok=9 bad=0 threads=3"), "\(run.output)")
    let echoes = app.filter { $0.hasPrefix("echo ") }
    #expect(echoes.count == 9, "\(app)")
    #expect(echoes.allSatisfy { $0.contains(" -> 0 ") }, "\(echoes)")
    let served = run.lines(Self.provider).filter { $0.hasPrefix("served ") }
    #expect(served.count == 9, "\(run.lines(Self.provider))")
    #expect(served.allSatisfy { $0.hasSuffix(" for \(Self.consumer) max_inside=1") }, "\(served)")
    let failures = run.output.split(separator: "\n").filter {
      $0.contains("] crashed") || $0.contains("] hung: ") || $0.contains("restarting ")
    }
    #expect(failures.isEmpty, "\(failures)")
  }
}
