import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

/// `forsetti-host --version`: the release, the module ABI of forsetti.h, the worker protocol,
/// and the build-id `readelf` reads from the same binary.
@Suite(.onTestThreads) struct VersionTests {
  /// The build-id as binutils reads it from the executable.
  func readelfBuildID() throws -> String {
    let r = try ProcessRunner.run("/usr/bin/readelf", ["-n", HostBinary.path])
    let line = try #require(r.stdout.split(separator: "\n").first { $0.contains("Build ID:") }, "no build-id")
    return String(line.split(separator: " ").last ?? "")
  }

  /// FORSETTI_ABI_MAJOR and _MINOR as the header states them.
  func headerABI() throws -> String {
    let header = try String(
      contentsOfFile: HostBinary.packageRoot + "/Sources/CForsetti/include/forsetti/version.h",
      encoding: .utf8)
    func value(_ name: String) -> String? {
      header.split(separator: "\n").first { $0.hasPrefix("#define \(name) ") }?.split(separator: " ").last
        .map { String($0.filter(\.isNumber)) }
    }
    return "\(try #require(value("FORSETTI_ABI_MAJOR"))).\(try #require(value("FORSETTI_ABI_MINOR")))"
  }

  /// The worker protocol as ProtocolVersion.swift states it.
  func workerProtocol() throws -> String {
    let source = try String(
      contentsOfFile: HostBinary.packageRoot + "/Sources/ForsettiBridge/Worker/ProtocolVersion.swift",
      encoding: .utf8)
    let line = try #require(
      source.split(separator: "\n").first { $0.contains("public static let current = ") })
    return String(line.split(separator: " ").last ?? "")
  }

  @Test func theLineNamesReleaseABIProtocolAndBuild() throws {
    let r = try HostBinary.run(["--version"])
    #expect(r.status == 0)
    let id = try readelfBuildID()
    #expect(id.count == 40)
    let abi = try headerABI()
    #expect(
      r.stdout
        == "forsetti-host \(ForsettiVersion.current) (module ABI \(abi), worker protocol \(try workerProtocol()), build \(id.prefix(12)))\n"
    )
  }

  @Test func jsonCarriesTheSameFacts() throws {
    let r = try HostBinary.run(["--version", "--json"])
    #expect(r.status == 0)
    let o = try #require(try JSONParser.parse(r.stdout).objectValue)
    #expect(o["version"]?.stringValue == ForsettiVersion.current.description)
    #expect(o["moduleABI"]?.stringValue == (try headerABI()))
    #expect(o["buildID"]?.stringValue == (try readelfBuildID()))
    #expect(o["workerProtocol"] == .number(try workerProtocol()))
  }

  @Test func jsonAloneIsAUsageError() throws {
    let r = try HostBinary.run(["--json"])
    #expect(r.status == 2)
    #expect(r.stderr.contains("--version"))
  }
}
