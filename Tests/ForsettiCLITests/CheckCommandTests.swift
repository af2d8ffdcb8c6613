import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

/// `forsetti-host check`, run as a real process over real files.
@Suite(.onTestThreads) struct CheckCommandTests {
  let dir = TemporaryDirectory("check")

  static func manifest(
    id: String, entry: String, type: String = "service", caps: [String] = [], platforms: [String] = ["linux"],
    product: String? = nil, max: String = "null"
  ) -> String {
    let capList = caps.map { "\"\($0)\"" }.joined(separator: ",")
    let platformList = platforms.map { "\"\($0)\"" }.joined(separator: ",")
    return """
      {"schemaVersion":"1.0","moduleID":"\(id)","displayName":"\(id)",
       "moduleVersion":{"major":1,"minor":0,"patch":0},"moduleType":"\(type)",
       "supportedPlatforms":[\(platformList)],"minForsettiVersion":{"major":0,"minor":1,"patch":0},
       "maxForsettiVersion":\(max),"capabilitiesRequested":[\(capList)],
       "iapProductID":\(product.map { "\"\($0)\"" } ?? "null"),"entryPoint":"\(entry)"}
      """
  }

  /// A folder of good, bad and duplicate manifests, plus a JSON file that is not a manifest.
  func writeMixedFolder() throws -> String {
    let m = dir.url("manifests")
    try dir.write(
      "manifests/a-good.json", Self.manifest(id: "com.example.good", entry: "good_entry", caps: ["storage"]))
    try dir.write("manifests/b-dup.json", Self.manifest(id: "com.example.good", entry: "other_entry"))
    try dir.write("manifests/c-broken.json", "{\"schemaVersion\": \"1.0\", \"moduleID\": ")
    try dir.write(
      "manifests/d-invalid.json",
      #"{"schemaVersion":"1.0","moduleID":"com.example.invalid","moduleType":"widget"}"#)
    try dir.write(
      "manifests/e-paid.json",
      Self.manifest(id: "com.example.paid", entry: "paid_entry", product: "com.example.pro"))
    try dir.write(
      "manifests/f-mac.json",
      Self.manifest(id: "com.example.maconly", entry: "mac_entry", platforms: ["macOS"]))
    try dir.write("manifests/g-notes.json", #"{"title":"release notes","items":[1,2,3]}"#)
    try dir.write(
      "manifests/nested/h-old.json",
      Self.manifest(id: "com.example.old", entry: "old_entry", max: #"{"major":0,"minor":1,"patch":0}"#))
    return m
  }

  func parseJSON(_ text: String) throws -> JSONObject {
    try #require(try JSONParser.parse(text).objectValue)
  }

  @Test func mixedFolderGivesEachFileItsVerdictInJSON() throws {
    let m = try writeMixedFolder()
    let r = try HostBinary.run([
      "check", "--manifests", m, "--approve-all", "--json", "--trace", "--host-version", "0.2.0",
    ])
    #expect(r.status == 1)
    let root = try parseJSON(r.stdout)
    let modules = try #require(root["modules"]?.arrayValue)
    var byFile: [String: JSONObject] = [:]
    for case .object(let o) in modules { byFile[o["file"]?.stringValue ?? ""] = o }
    #expect(
      byFile.keys.sorted() == [
        "a-good.json", "b-dup.json", "c-broken.json", "d-invalid.json", "e-paid.json", "f-mac.json",
        "nested/h-old.json",
      ])
    let expected: [String: (String, String?)] = [
      "a-good.json": ("pass", nil), "b-dup.json": ("blocked", "duplicateModuleID"),
      "c-broken.json": ("blocked", "invalidJSON"), "d-invalid.json": ("blocked", "validationFailed"),
      "e-paid.json": ("blocked", "moduleLocked"), "f-mac.json": ("blocked", "unsupportedPlatform"),
      "nested/h-old.json": ("blocked", "unsupportedForsettiVersion"),
    ]
    for (file, (verdict, reason)) in expected {
      let o = try #require(byFile[file])
      #expect(o["verdict"]?.stringValue == verdict, "\(file)")
      #expect(o["reason"] == JSONValue.string(orNull: reason), "\(file)")
    }
    #expect(byFile["a-good.json"]?["moduleID"]?.stringValue == "com.example.good")
    #expect(byFile["b-dup.json"]?["moduleID"]?.stringValue == "com.example.good")
    #expect(byFile["c-broken.json"]?["moduleID"] == .null)
    #expect(root["ignored"] == .strings(["g-notes.json"]))

    // The trace of a passing module names every step, binary and load steps skipped.
    let trace = try #require(byFile["a-good.json"]?["trace"]?.arrayValue)
    let steps = trace.compactMap { $0.objectValue?["step"]?.stringValue }
    #expect(steps == GateStep.allCases.map(\.rawValue))
    let verdicts = trace.compactMap { $0.objectValue?["verdict"]?.stringValue }
    #expect(verdicts == ["pass", "skipped", "pass", "pass", "pass", "pass", "skipped", "skipped", "skipped"])
    // A blocked module's later steps are skipped, not passed.
    let paid = try #require(byFile["e-paid.json"]?["trace"]?.arrayValue).compactMap { $0.objectValue }
    #expect(paid.first { $0["step"]?.stringValue == "entitlement" }?["verdict"]?.stringValue == "fail")
    #expect(
      paid.first { $0["step"]?.stringValue == "runtimeRequirements" }?["verdict"]?.stringValue == "skipped")
  }

  @Test func withoutTraceEachModuleCarriesOnlyWhatBlockedIt() throws {
    let m = try writeMixedFolder()
    let common = ["check", "--manifests", m, "--approve-all", "--json", "--host-version", "0.2.0"]
    let short = try HostBinary.run(common)
    let long = try HostBinary.run(common + ["--trace"])
    #expect(short.status == 1)
    #expect(long.status == 1)
    let modules = try #require(try parseJSON(short.stdout)["modules"]?.arrayValue).compactMap(\.objectValue)
    let traced = try #require(try parseJSON(long.stdout)["modules"]?.arrayValue).compactMap(\.objectValue)
    // The same modules and verdicts either way; only the trace is left out.
    #expect(modules.count == 7)
    for (a, b) in zip(modules, traced) {
      for key in ["file", "moduleID", "verdict", "reason"] { #expect(a[key] == b[key], "\(key)") }
      #expect(a["trace"] == nil)
      #expect(b["trace"]?.arrayValue?.count == GateStep.allCases.count)
      // What blocked the module is its trace's first failure, whole.
      let failure = b["trace"]?.arrayValue?.compactMap(\.objectValue).first { $0["verdict"] == "fail" }
      #expect(a["step"] == (failure?["step"] ?? .null), "\(a)")
      #expect(a["detail"] == (failure?["detail"] ?? .null), "\(a)")
    }
    let byFile = Dictionary(uniqueKeysWithValues: modules.map { ($0["file"]?.stringValue ?? "", $0) })
    #expect(byFile["a-good.json"]?["step"] == .null)
    #expect(byFile["e-paid.json"]?["step"]?.stringValue == "entitlement")
    #expect(byFile["e-paid.json"]?["detail"]?.stringValue?.contains("com.example.pro") == true)
    #expect(byFile["b-dup.json"]?["detail"]?.stringValue?.contains("a-good.json") == true)
  }

  @Test func traceInHumanFormListsEveryStepUnderItsModule() throws {
    let m = try writeMixedFolder()
    let r = try HostBinary.run(["check", "--manifests", m, "--approve-all", "--trace"])
    #expect(r.status == 1)
    let lines = r.stdout.split(separator: "\n").map(String.init)
    let good = try #require(lines.firstIndex { $0.hasPrefix("PASS") && $0.contains("  a-good.json") })
    let steps = lines[(good + 1)...].prefix { $0.hasPrefix("  ") }
    #expect(steps.count == GateStep.allCases.count)
    #expect(steps.first?.contains("PASS    discover") == true, "\(steps)")
    #expect(steps.contains { $0.contains("SKIPPED inspectBinary") })
    let paid = try #require(lines.firstIndex { $0.contains("  e-paid.json") })
    #expect(lines[paid + 5].contains("FAIL    entitlement         moduleLocked: "), "\(lines[paid + 5])")
    #expect(lines.last == "7 modules: 2 pass, 5 blocked, 1 non-manifest JSON file ignored")
  }

  @Test func mixedFolderInHumanForm() throws {
    let m = try writeMixedFolder()
    let r = try HostBinary.run(["check", "--manifests", m, "--approve-all"])
    #expect(r.status == 1)
    let lines = r.stdout.split(separator: "\n").map(String.init)
    func line(_ file: String) -> String? { lines.first { $0.contains("  \(file)") } }
    #expect(line("a-good.json")?.hasPrefix("PASS") == true)
    #expect(line("b-dup.json")?.contains("duplicateModuleID") == true)
    #expect(line("b-dup.json")?.contains("a-good.json") == true)
    #expect(line("c-broken.json")?.contains("invalidJSON") == true)
    #expect(line("c-broken.json")?.contains("line 1") == true)
    #expect(line("d-invalid.json")?.contains("moduleType: unknown value \"widget\"") == true)
    #expect(line("e-paid.json")?.contains("com.example.pro") == true)
    // At the default host version 0.1.0, the module capped at 0.1.0 passes.
    #expect(line("nested/h-old.json")?.hasPrefix("PASS") == true)
    #expect(lines.last == "7 modules: 2 pass, 5 blocked, 1 non-manifest JSON file ignored")
  }

  @Test func allPassingExitsZeroAndEntitlementsUnlock() throws {
    try dir.write(
      "m/paid.json", Self.manifest(id: "com.example.paid", entry: "paid_entry", product: "com.example.pro"))
    let locked = try HostBinary.run(["check", "--manifests", dir.url("m")])
    #expect(locked.status == 1)
    try dir.write("ent.json", #"{"unlockedProducts":["com.example.pro"]}"#)
    let unlocked = try HostBinary.run([
      "check", "--manifests", dir.url("m"), "--entitlements", dir.url("ent.json"),
    ])
    #expect(unlocked.status == 0)
    #expect(unlocked.stdout.hasPrefix("PASS"))
  }

  @Test func hostVersionAnswersWouldTheyRunThere() throws {
    try dir.write(
      "m/capped.json",
      Self.manifest(id: "com.example.capped", entry: "e", max: #"{"major":0,"minor":2,"patch":0}"#))
    #expect(
      try HostBinary.run(["check", "--manifests", dir.url("m"), "--host-version", "0.2.0"]).status == 0)
    let later = try HostBinary.run(["check", "--manifests", dir.url("m"), "--host-version=0.3.0"])
    #expect(later.status == 1)
    #expect(later.stdout.contains("unsupportedForsettiVersion"))
    #expect(later.stdout.contains("at most 0.2.0"))
  }

  @Test func approvalsAreReadFromTheStateDirectory() throws {
    try dir.write(
      "m/s.json", Self.manifest(id: "com.example.store", entry: "e", caps: ["storage", "telemetry"]))
    let pending = try HostBinary.run(["check", "--manifests", dir.url("m"), "--state", dir.url("state")])
    #expect(pending.status == 1)
    #expect(pending.stdout.contains("approvalPending"))
    try dir.write(
      "state/approvals.json", #"{"version":1,"modules":{"com.example.store":{"capabilities":["storage"]}}}"#)
    // An update may run with what was approved; the added capability waits, named alone.
    let partial = try HostBinary.run([
      "check", "--manifests", dir.url("m"), "--state", dir.url("state"), "--json", "--trace",
    ])
    #expect(partial.status == 0)
    #expect(partial.stdout.contains("update adds telemetry, awaiting approval"))
    #expect(partial.stdout.contains("runs with storage"))
    try dir.write(
      "state/approvals.json",
      #"{"version":1,"modules":{"com.example.store":{"capabilities":["storage","telemetry"]}}}"#)
    #expect(
      try HostBinary.run(["check", "--manifests", dir.url("m"), "--state", dir.url("state")]).status == 0)
  }

  @Test func policyDeniesCapabilities() throws {
    try dir.write("m/s.json", Self.manifest(id: "com.example.net", entry: "e", caps: ["networking"]))
    let r = try HostBinary.run([
      "check", "--manifests", dir.url("m"), "--approve-all", "--policy", "fixed:storage,telemetry",
    ])
    #expect(r.status == 1)
    #expect(r.stdout.contains("capabilityDenied"))
    #expect(r.stdout.contains("networking"))
    let bad = try HostBinary.run(["check", "--manifests", dir.url("m"), "--policy", "fixed:storag"])
    #expect(bad.status == 2)
    #expect(bad.stderr.contains("did you mean 'storage'?"))
  }

  @Test func strictStopsAtTheFirstBadFile() throws {
    try dir.write("m/a.json", Self.manifest(id: "com.example.a", entry: "a"))
    try dir.write("m/b.json", #"{"readme": true}"#)
    try dir.write("m/c.json", Self.manifest(id: "com.example.c", entry: "c"))
    let fallback = try HostBinary.run(["check", "--manifests", dir.url("m"), "--json"])
    #expect(fallback.status == 0)
    let strict = try HostBinary.run(["check", "--manifests", dir.url("m"), "--strict", "--json"])
    #expect(strict.status == 1)
    let root = try parseJSON(strict.stdout)
    #expect(root["strictStoppedAt"]?.stringValue == "b.json")
    let files = try #require(root["modules"]?.arrayValue).compactMap { $0.objectValue?["file"]?.stringValue }
    #expect(files == ["a.json", "b.json"])
  }

  @Test func hostileFilesNeverCrashIt() throws {
    try dir.write("m/deep.json", String(repeating: "[", count: 100_000))
    try dir.write("m/binary.json", bytes: (0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7919) })
    try dir.write("m/huge.json", "{\"moduleID\":\"" + String(repeating: "x", count: 2 << 20) + "\"}")
    try dir.write("m/utf8.json", bytes: Array(#"{"moduleID":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8))
    try dir.write("m/null.json", "null")
    let r = try HostBinary.run(["check", "--manifests", dir.url("m"), "--json"])
    #expect(r.status == 1)
    let modules = try #require(try parseJSON(r.stdout)["modules"]?.arrayValue)
    #expect(modules.count == 4)  // null.json is JSON without manifest keys: ignored
    for case .object(let o) in modules { #expect(o["verdict"]?.stringValue == "blocked") }
  }

  @Test func pluginsDirectoryInspectsBinaries() throws {
    try dir.write("m/a.json", Self.manifest(id: "com.example.a", entry: "alpha_entry"))
    try dir.write("m/b.json", Self.manifest(id: "com.example.b", entry: "beta_entry"))
    let plugins = TemporaryDirectory("plugins")
    try CFixture.sharedObject("alpha.so", source: "int alpha_entry(void) { return 0; }\n", in: plugins)
    let r = try HostBinary.run([
      "check", "--manifests", dir.url("m"), "--plugins", plugins.path, "--json", "--trace",
    ])
    #expect(r.status == 1)
    let modules = try #require(try parseJSON(r.stdout)["modules"]?.arrayValue).compactMap(\.objectValue)
    #expect(modules.map { $0["reason"] } == [.null, .string("binaryNotFound")])
    let step = modules[0]["trace"]?.arrayValue?[1].objectValue
    #expect(step?["verdict"]?.stringValue == "pass")
    #expect(step?["detail"]?.stringValue?.contains("alpha.so") == true)
    let missing = try HostBinary.run(["check", "--manifests", dir.url("m"), "--plugins", dir.url("nope")])
    #expect(missing.status == 2)
    #expect(missing.stderr.contains("--plugins"))
  }

  @Test func usageErrorsExitTwoWithAHint() throws {
    let cases: [([String], String)] = [
      (["check", "--json=1"], "takes no value"),
      (["check", "--host-version", "1.2"], "expected a version X.Y.Z"),
      (["check", "--manifest", "x"], "did you mean '--manifests'?"),
      (["check", "--manifests", dir.url("absent")], "is not a directory"),
      (["check", "--entitlements", dir.url("absent.json")], "no such file"),
      (["chekc"], "did you mean 'check'?"),
    ]
    for (args, message) in cases {
      let r = try HostBinary.run(args)
      #expect(r.status == 2, "\(args)")
      #expect(r.stderr.contains(message), "\(args): \(r.stderr)")
      #expect(r.stdout.isEmpty, "\(args)")
    }
  }

  @Test func helpAndVersionAreTrue() throws {
    let top = try HostBinary.run(["--help"])
    #expect(top.status == 0)
    #expect(top.stdout.contains("check"))
    let help = try HostBinary.run(["check", "--help"])
    #expect(help.status == 0)
    for flag in [
      "--manifests", "--plugins", "--strict", "--policy", "--entitlements", "--approve-all", "--host-version",
      "--state", "--json",
    ] {
      #expect(help.stdout.contains(flag), "\(flag)")
    }
    #expect(try HostBinary.run(["help", "check"]).stdout == help.stdout)
    #expect(
      try HostBinary.run(["--version"]).stdout.hasPrefix(
        "forsetti-host \(ForsettiVersion.current) (module ABI "))
  }

  @Test func bundledManifestsAllPass() throws {
    let r = try HostBinary.run(
      [
        "check", "--manifests", (HostBinary.packageRoot as NSString).appendingPathComponent("manifests"),
        "--approve-all", "--strict",
      ])
    #expect(r.status == 0, "\(r.stdout)")
  }
}
