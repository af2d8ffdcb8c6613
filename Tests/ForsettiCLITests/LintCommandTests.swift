import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

/// `forsetti-host lint`: the review checklist on real manifests and binaries.
@Suite(.onTestThreads) struct LintCommandTests {
  let dir = TemporaryDirectory("lint")

  func lint(_ args: [String]) throws -> (ProcessResult, [JSONObject]) {
    let r = try HostBinary.run(["lint"] + args + ["--json"])
    let findings =
      try JSONParser.parse(r.stdout).objectValue?["findings"]?.arrayValue?.compactMap(\.objectValue) ?? []
    return (r, findings)
  }

  @Test func theBundledManifestsAreClean() throws {
    for name in ["counter.json", "dashboard.json", "hello-c.json"] {
      let (r, findings) = try lint([
        (HostBinary.packageRoot as NSString).appendingPathComponent("manifests/\(name)")
      ])
      #expect(r.status == 0, "\(name)")
      #expect(findings.isEmpty, "\(name): \(findings)")
    }
  }

  @Test func requirementsRolesAndUIAreReviewed() throws {
    let manifest = try dir.write(
      "m.json",
      #"""
      {"schemaVersion":"1.1","manifestTemplateVersion":"1.1","moduleID":"com.test.sloppy","displayName":"S",
       "moduleVersion":{"major":1,"minor":0,"patch":0},"moduleType":"service","supportedPlatforms":["linux"],
       "minForsettiVersion":{"major":0,"minor":1,"patch":0},"capabilitiesRequested":["toolbar_items","ui_theme_mask"],
       "iapProductID":"pro version","entryPoint":"sloppy_entry","defaultModuleRole":"shared_database",
       "runtimeRequirements":{"io":[{"requirementID":"db","kind":"storage","access":"read","required":true}],
         "dataIsolation":{"mode":"private_to_module"}}}
      """#)
    let (r, findings) = try lint([manifest])
    #expect(r.status == 1)
    let byCheck = Dictionary(grouping: findings) { $0["check"]?.stringValue ?? "" }
    #expect(
      byCheck["default role"]?.first?["message"]?.stringValue?.contains("needs capability shared_database")
        == true)
    #expect(
      byCheck["runtime requirements"]?.first?["message"]?.stringValue?.contains("needs capability storage")
        == true)
    #expect(
      byCheck["UI"]?.first?["message"]?.stringValue?.contains("service module requests UI capabilities")
        == true)
    #expect(byCheck["product ID"]?.first?["level"]?.stringValue == "warning")
    #expect(byCheck["theme mask"]?.first?["level"]?.stringValue == "warning")
  }

  @Test func theBinaryIsComparedWithTheManifest() throws {
    var f = ModuleFixture(moduleID: "com.test.bin", entryPoint: "bin_entry")
    f.start = "return host->resolve(FORSETTI_SERVICE_STORAGE) ? FORSETTI_OK : FORSETTI_ERR_DENIED;"
    let so = try f.install(in: dir, name: "bin", capabilities: ["telemetry"])
    let (r, findings) = try lint([dir.url("manifests/bin.json"), "--plugin", so])
    #expect(r.status == 0)  // warnings only
    let messages = findings.compactMap { $0["message"]?.stringValue }
    #expect(
      messages.contains { $0.contains("names forsetti.storage but the manifest does not request storage") })
    #expect(
      messages.contains {
        $0.contains("telemetry is requested but the binary never names forsetti.telemetry")
      })

    let other = try CFixture.sharedObject(
      "other.so", source: "int something_else(void) { return 0; }\n", in: dir)
    let (missing, found) = try lint([dir.url("manifests/bin.json"), "--plugin", other])
    #expect(missing.status == 1)
    #expect(
      found.contains { $0["check"]?.stringValue == "entry point" && $0["level"]?.stringValue == "error" })
    let broken = try HostBinary.run(["lint", dir.url("nope.json")])
    #expect(broken.status == 2)
    #expect(broken.stderr.contains("cannot be read"))
  }
}
