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

  /// Issue 41, third finding: nothing told a vendor which systems a binary loads on. A module
  /// calling `pthread_create` (GLIBC_2.34 when built on Debian 12) is refused by `--glibc 2.28`
  /// and `--target debian-11`, naming the symbol and the version, and accepted by `--glibc 2.36`
  /// and `--target debian-12` (the controls); a library outside the base set is named too.
  @Test func aBaselineRefusesSymbolVersionsNewerThanItsGlibc() throws {
    var f = ModuleFixture(moduleID: "com.test.threads", entryPoint: "threads_entry")
    // libcrypt (libc6-dev brings libcrypt-dev) is on every Debian system but in no baseline's set.
    f.prelude =
      "#include <pthread.h>\nchar *crypt(const char *, const char *);\nstatic void *idle(void *a) { return a; }\n"
    f.start = """
      pthread_t t;
      if (pthread_create(&t, NULL, idle, NULL) == 0) pthread_join(t, NULL);
      return crypt("k", "$1$salt") ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
      """
    let so = try f.install(in: dir, name: "threads", ccFlags: ["-pthread", "-lcrypt"])
    let manifest = dir.url("manifests/threads.json")
    for (args, refused) in [
      (["--glibc", "2.28"], true), (["--target", "debian-11"], true), (["--glibc", "2.36"], false),
      (["--target", "debian-12"], false),
    ] {
      let (r, findings) = try lint([manifest, "--plugin", so] + args)
      let versions = findings.filter {
        $0["level"]?.stringValue == "error" && $0["message"]?.stringValue?.contains("GLIBC_2.34") == true
      }
      #expect(r.status == 1, "\(args): libcrypt is outside every baseline: \(findings)")
      #expect(versions.isEmpty == !refused, "\(args): \(findings)")
      if refused {
        #expect(versions.first?["message"]?.stringValue?.contains("pthread_create") == true, "\(versions)")
      }
      #expect(
        findings.contains { $0["message"]?.stringValue?.contains("needs libcrypt.so.1, which") == true },
        "\(findings)")
    }
    let (plain, findings) = try lint([manifest, "--plugin", so])
    #expect(plain.status == 0, "without a baseline the binary loads here: \(findings)")
    let bad = try HostBinary.run(["lint", manifest, "--plugin", so, "--glibc", "two"])
    #expect(bad.status == 2 && bad.stderr.contains("MAJOR.MINOR"), "\(bad.stderr)")
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
