import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

/// Approvals, entitlements, licences and signed modules through the real CLI.
@Suite(.onTestThreads) struct TrustTests {
  let dir = TemporaryDirectory("trust")

  var state: String { dir.url("state") }

  func module(
    _ caps: [String], product: String? = nil, id: String = "com.test.app", entry: String = "app_entry"
  ) throws
    -> ModuleFixture
  {
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.start = """
      fixture_log("started");
      fixture_log(host->resolve(FORSETTI_SERVICE_TELEMETRY) ? "telemetry: granted" : "telemetry: denied");
      return FORSETTI_OK;
      """
    try f.install(
      in: dir, name: entry, capabilities: caps,
      manifestExtra: product.map { #","iapProductID":"\#($0)""# } ?? "")
    return f
  }

  func writeManifest(_ f: ModuleFixture, _ caps: [String]) throws {
    try dir.write("manifests/\(f.entryPoint).json", f.manifest(capabilities: caps))
  }

  func run(_ extra: [String] = []) throws -> ProcessResult {
    try HostBinary.run(
      [
        "run", "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state", state,
        "--for", "0", "--json",
      ]
        + extra)
  }

  /// The approval step's detail in `run --json`.
  func approvalDetail(_ r: ProcessResult) throws -> String {
    let modules = try #require(try JSONParser.parse(r.stdout).objectValue?["modules"]?.arrayValue)
    let trace = modules.first?.objectValue?["trace"]?.arrayValue ?? []
    return trace.compactMap(\.objectValue).first { $0["step"]?.stringValue == "approval" }?["detail"]?
      .stringValue ?? ""
  }

  func reason(_ r: ProcessResult) throws -> String? {
    let modules = try #require(try JSONParser.parse(r.stdout).objectValue?["modules"]?.arrayValue)
    return modules.first?.objectValue?["reason"]?.stringValue
  }

  func approved() throws -> [String] {
    let o = try JSONParser.parse(String(contentsOfFile: state + "/approvals.json", encoding: .utf8))
    return o.objectValue?["modules"]?.objectValue?["com.test.app"]?.objectValue?["capabilities"]?.arrayValue?
      .compactMap(\.stringValue) ?? []
  }

  @Test func everyApprovalTransition() throws {
    let f = try module(["storage", "telemetry"])
    // First run: nothing approved; a non-interactive run never waits for an answer.
    let first = try run()
    #expect(first.status == 1)
    #expect(try reason(first) == "approvalPending")
    #expect(first.stdout.contains("first run: approval needed for storage, telemetry"))

    #expect(
      try HostBinary.run(["approve", "com.test.app", "--manifests", dir.url("manifests"), "--state", state])
        .status == 0)
    #expect(try approved() == ["storage", "telemetry"])
    #expect(try run().status == 0)  // same set: no question
    #expect(try run().status == 0)

    // Reduced: runs, and the stored approval shrinks at once.
    try writeManifest(f, ["storage"])
    #expect(try run().status == 0)
    #expect(try approved() == ["storage"])

    // Re-added after the reduction: asked again, for it alone; meanwhile the module runs with
    // what stays approved and the re-added capability is denied.
    try writeManifest(f, ["storage", "telemetry"])
    let readded = try run()
    #expect(readded.status == 0)
    #expect(try approvalDetail(readded).contains("update adds telemetry, awaiting approval"))
    #expect(try approvalDetail(readded).contains("runs with storage"))
    #expect(readded.stderr.contains("telemetry: denied"))
    #expect(
      try HostBinary.run(["approve", "com.test.app", "--manifests", dir.url("manifests"), "--state", state])
        .status == 0)
    #expect(try run().stderr.contains("telemetry: granted"))

    // Broadened: only the added capability is pending; approving just it is enough.
    try writeManifest(f, ["storage", "networking"])
    let broadened = try run()
    #expect(try approvalDetail(broadened).contains("update adds networking, awaiting approval"))
    #expect(
      try HostBinary.run([
        "approve", "com.test.app", "--capabilities", "networking", "--manifests", dir.url("manifests"),
        "--state", state,
      ])
      .status == 0)
    #expect(try run().status == 0)

    // Revoked: asked again.
    #expect(try HostBinary.run(["revoke", "com.test.app", "--state", state]).status == 0)
    #expect(try reason(try run()) == "approvalPending")
    let wrong = try HostBinary.run([
      "approve", "com.test.app", "--capabilities", "camera", "--manifests", dir.url("manifests"), "--state",
      state,
    ])
    #expect(wrong.status == 2)
  }

  @Test func aKilledWriteNeverLeavesABrokenApprovalStore() throws {
    _ = try module(["storage", "telemetry", "networking"])
    var rng = SystemRandomNumberGenerator()
    for i in 0..<40 {
      let caps = i % 2 == 0 ? "storage" : "telemetry,networking"
      let p = Process()
      p.executableURL = URL(fileURLWithPath: HostBinary.path)
      p.arguments = [
        "approve", "com.test.app", "--capabilities", caps, "--manifests", dir.url("manifests"), "--state",
        state,
      ]
      p.standardOutput = FileHandle.nullDevice
      p.standardError = FileHandle.nullDevice
      try p.run()
      usleep(UInt32.random(in: 0...12_000, using: &rng))
      kill(p.processIdentifier, SIGKILL)
      p.waitUntilExit()
      if FileManager.default.fileExists(atPath: state + "/approvals.json") {
        let text = try String(contentsOfFile: state + "/approvals.json", encoding: .utf8)
        let value = try JSONParser.parse(text)
        guard case .success = ApprovalLedger.decode(value) else {
          Issue.record("approvals.json is not a valid store after a kill: \(text)")
          return
        }
      }
    }
    // The store still works afterwards.
    #expect(
      try HostBinary.run(["approve", "com.test.app", "--manifests", dir.url("manifests"), "--state", state])
        .status == 0)
    #expect(try approved() == ["networking", "storage", "telemetry"])
  }

  func keygen(_ name: String) throws -> String {
    let r = try HostBinary.run(["keygen", dir.url(name)])
    #expect(r.status == 0, "\(r.stderr)")
    return dir.url(name)
  }

  /// `forsetti-host trust KEY.pub --for ROLE` on this state directory.
  func trust(_ key: String, for role: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let r = try HostBinary.run(["trust", key + ".pub", "--for", role, "--state", state])
    #expect(r.status == 0, "\(r.stderr)", sourceLocation: sourceLocation)
  }

  func issue(_ key: String, product: String, expires: String, to file: String) throws {
    let r = try HostBinary.run([
      "licence", "--key", key + ".key", "--product", product, "--licensee", "Ada", "--expires", expires,
      "--out", file,
    ])
    #expect(r.status == 0, "\(r.stderr)")
  }

  /// A vendor key the host trusts for licences and the module signed with it; returns the key.
  @discardableResult
  func trustVendorAndSign() throws -> String {
    let vendor = try keygen("vendor")
    try trust(vendor, for: "licences")
    #expect(
      try HostBinary.run(["sign", dir.url("plugins/app_entry.so"), "--key", vendor + ".key"]).status == 0)
    try FileManager.default.createDirectory(atPath: state + "/licences", withIntermediateDirectories: true)
    return vendor
  }

  static func instant(_ secondsFromNow: Double) -> String {
    let f = ISO8601DateFormatter()
    return f.string(from: Date().addingTimeInterval(secondsFromNow))
  }

  @Test func signedLicencesUnlockAndTamperedOnesDoNot() throws {
    _ = try module([], product: "com.vendor.pro")
    let vendor = try keygen("vendor")
    try FileManager.default.createDirectory(atPath: state + "/licences", withIntermediateDirectories: true)
    try issue(
      vendor, product: "com.vendor.pro", expires: Self.instant(3600), to: state + "/licences/pro.licence")
    // Not yet trusted: locked.
    #expect(try reason(try run()) == "moduleLocked")
    // Trusted for modules only: it does not count for licences.
    try trust(vendor, for: "modules")
    #expect(try reason(try run()) == "moduleLocked")
    // Trusted for licences: unlocked, and the module, unsigned, is not refused for it.
    try trust(vendor, for: "licences")
    #expect(try run().status == 0)
    let explain = try HostBinary.run([
      "explain", "com.test.app", "--manifests", dir.url("manifests"), "--state", state, "--approve-all",
    ])
    #expect(explain.stdout.contains("entitlement: UNLOCKED"))
    #expect(explain.stdout.contains("active: com.vendor.pro"))
    #expect(explain.stdout.contains("module override, persisted: unset"))

    // One changed field: the signature no longer matches.
    let text = try String(contentsOfFile: state + "/licences/pro.licence", encoding: .utf8)
    try text.replacingOccurrences(of: "Ada", with: "Eve").write(
      toFile: state + "/licences/pro.licence", atomically: true, encoding: .utf8)
    #expect(try reason(try run()) == "moduleLocked")
    let tampered = try HostBinary.run([
      "explain", "com.test.app", "--manifests", dir.url("manifests"), "--state", state,
    ])
    #expect(tampered.stdout.contains("signature does not match"))

    // An override decides before the licence, and says so.
    #expect(
      try HostBinary.run(["override", "product", "com.vendor.pro", "on", "--state", state]).status == 0)
    #expect(try run().status == 0)
    #expect(try HostBinary.run(["override", "module", "com.test.app", "off", "--state", state]).status == 0)
    #expect(try reason(try run()) == "moduleLocked")
    let why = try HostBinary.run([
      "explain", "com.test.app", "--manifests", dir.url("manifests"), "--state", state, "--json",
    ])
    #expect(
      try JSONParser.parse(why.stdout).objectValue?["entitlement"]?.objectValue?["decidedBy"]
        == .string("moduleOverride:persisted"))
    #expect(
      try HostBinary.run(["override", "module", "com.test.app", "clear", "--state", state]).status == 0)
    #expect(try run().status == 0)
  }

  /// The expiry must come after the host judged the licence valid, however long a loaded machine
  /// takes to get there: a host that judged it already expired proves nothing, so the licence is
  /// issued again with a later expiry until the module starts under it; then the expiry alone,
  /// with no file changing, must stop it.
  @Test func anExpiringLicenceStopsItsModuleWhileTheHostRuns() throws {
    _ = try module([], product: "com.vendor.pro")
    let vendor = try trustVendorAndSign()
    var stoppedByExpiry = false
    for expiresIn in [3.0, 15, 60] {
      try issue(
        vendor, product: "com.vendor.pro", expires: Self.instant(expiresIn),
        to: state + "/licences/pro.licence")
      let host = try DevHost.launch(
        [
          "run", "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state", state,
          "--for", "600",
        ], separateErrors: true)
      defer { host.stop() }
      let first = host.awaitAny(["[module=com.test.app] started", "moduleLocked"], timeout: 120)
      guard let first, first.1.contains("started") else {
        #expect(first != nil, "the host said nothing of the module: \(host.lines.suffix(20))")
        continue  // judged after the expiry: again, with a later one
      }
      // A module stopped for a reason is a warning: on standard error.
      let stopped = host.awaitAny(
        ["moduleLocked: stopped: no longer unlocked"], timeout: expiresIn + 120, in: { host.errorLines })
      #expect(
        stopped != nil,
        "standard error: \(host.errorLines.suffix(20)); standard output: \(host.lines.suffix(20))")
      // What an operator's tooling reads says why it is no longer running.
      let published = LiveHost.wait(
        stateDirectory: state, pid: host.process.processIdentifier,
        for: ["com.test.app": "blocked/moduleLocked"],
        timeout: 60, isRunning: { host.process.isRunning })
      #expect(published.reached, "\(published)")
      stoppedByExpiry = true
      break
    }
    #expect(stoppedByExpiry, "the module never started under a licence that had not yet expired")
  }

  @Test func allowAllEntitlementsExistsForDevOnly() throws {
    _ = try module([], product: "com.vendor.pro")
    #expect(try reason(try run()) == "moduleLocked")  // run's default: nothing unlocked
    let flag = try run(["--allow-all-entitlements"])
    #expect(flag.status == 2)
    #expect(flag.stderr.contains("unknown option '--allow-all-entitlements'"))
    let help = try HostBinary.run(["run", "--help"])
    #expect(!help.stdout.contains("allow-all-entitlements"))
    let dev = try HostBinary.run([
      "dev", "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state", state, "--for",
      "0.3",
      "--allow-all-entitlements",
    ])
    #expect(dev.stdout.contains("[module=com.test.app] started"), "\(dev.stdout)")
  }

  @Test func signaturesAreRequiredOnlyWithRequireSignatures() throws {
    _ = try module([])
    let so = dir.url("plugins/app_entry.so")
    let check = [
      "check", "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state", state,
      "--approve-all", "--json",
    ]
    let required = check + ["--require-signatures"]
    #expect(try HostBinary.run(check).status == 0)  // no trusted keys: signatures not required
    let vendor = try keygen("vendor")
    // Trusting a vendor for modules does not by itself refuse an unsigned module.
    try trust(vendor, for: "modules")
    #expect(try HostBinary.run(check).status == 0)
    let unsignedExplain = try explainJSON(["--plugins", dir.url("plugins")])
    #expect(unsignedExplain["required"] == .bool(false))
    #expect(unsignedExplain["finding"] == "unsigned")
    #expect(unsignedExplain["passed"] == .bool(true))
    // The operator requires signatures: now it is.
    #expect(try reason(try HostBinary.run(required)) == "unsigned")
    let refusedExplain = try explainJSON(["--plugins", dir.url("plugins"), "--require-signatures"])
    #expect(refusedExplain["required"] == .bool(true))
    #expect(refusedExplain["reason"] == "unsigned")
    #expect(refusedExplain["passed"] == .bool(false))
    #expect(try HostBinary.run(["sign", so, "--key", vendor + ".key"]).status == 0)
    #expect(try HostBinary.run(required).status == 0)
    #expect(try HostBinary.run(["verify", so, "--state", state]).status == 0)

    // Signed by a key the host does not trust: runs unless signatures are required.
    let stranger = try keygen("stranger")
    #expect(try HostBinary.run(["sign", so, "--key", stranger + ".key"]).status == 0)
    #expect(try HostBinary.run(check).status == 0)
    let text = try HostBinary.run([
      "explain", "com.test.app", "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"),
      "--state", state, "--approve-all",
    ])
    #expect(text.status == 0, "\(text.stderr)")
    #expect(text.stdout.contains("signed by an untrusted key (signatures not required)"), "\(text.stdout)")
    #expect(text.stdout.contains("signatures: not required"), "\(text.stdout)")
    #expect(try reason(try HostBinary.run(required)) == "signatureInvalid")
    let untrusted = try explainJSON(["--plugins", dir.url("plugins"), "--require-signatures"])
    #expect(untrusted["finding"] == "untrustedKey")
    #expect(untrusted["detail"]?.stringValue?.contains("--for modules") == true, "\(untrusted)")

    // One changed byte under a trusted key's signature is refused, required or not.
    #expect(try HostBinary.run(["sign", so, "--key", vendor + ".key"]).status == 0)
    var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: so)))
    bytes[bytes.count / 2] ^= 0x01
    try Data(bytes).write(to: URL(fileURLWithPath: so))
    #expect(try reason(try HostBinary.run(check)) == "signatureInvalid")
    #expect(try reason(try HostBinary.run(required)) == "signatureInvalid")
    #expect(try HostBinary.run(["verify", so, "--state", state]).status == 1)
    // And run refuses it before loading.
    #expect(try reason(try run(["--approve-all"])) == "signatureInvalid")
  }

  /// explain --json's `signatures` object for com.test.app.
  func explainJSON(_ extra: [String]) throws -> JSONObject {
    let r = try HostBinary.run(
      [
        "explain", "com.test.app", "--manifests", dir.url("manifests"), "--state", state, "--approve-all",
        "--json",
      ]
        + extra)
    return try #require(try JSONParser.parse(r.stdout).objectValue?["signatures"]?.objectValue, "\(r.stderr)")
  }

  /// Issue 19's case: vendor A's key trusted for its licence, vendor B's module unsigned. B's
  /// module must still run, and A's paid module must be unlocked.
  @Test func aLicenceKeyOfOneVendorDoesNotRefuseAnotherVendorsUnsignedModule() throws {
    _ = try module([], product: "com.a.pro", id: "com.a.paid", entry: "paid_entry")
    _ = try module([], id: "com.b.free", entry: "free_entry")
    let a = try keygen("vendorA")
    try trust(a, for: "licences")
    try FileManager.default.createDirectory(atPath: state + "/licences", withIntermediateDirectories: true)
    try issue(a, product: "com.a.pro", expires: Self.instant(3600), to: state + "/licences/pro.licence")
    let r = try run(["--approve-all"])
    #expect(r.status == 0, "\(r.stdout)\n\(r.stderr)")
    let modules = try #require(try JSONParser.parse(r.stdout).objectValue?["modules"]?.arrayValue)
    let verdicts = Dictionary(
      uniqueKeysWithValues: modules.compactMap(\.objectValue).compactMap { o in
        o["moduleID"]?.stringValue.map { ($0, o["reason"] ?? .null) }
      })
    #expect(verdicts == ["com.a.paid": .null, "com.b.free": .null], "\(r.stdout)")
  }

  @Test func requireSignaturesWithNoKeyForModulesIsAConfigurationError() throws {
    _ = try module([])
    let licenceKey = try keygen("vendor")
    try trust(licenceKey, for: "licences")  // a key for licences does not count
    for verb in ["check", "run", "explain"] {
      var args = [verb] + (verb == "explain" ? ["com.test.app"] : [])
      args += ["--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state", state]
      args += (verb == "run" ? ["--for", "0"] : []) + ["--require-signatures"]
      let r = try HostBinary.run(args)
      #expect(r.status == 2, "\(verb): \(r.stderr)")
      #expect(r.stderr.contains(state + "/trusted-keys/modules"), "\(verb): \(r.stderr)")
      #expect(r.stderr.contains("forsetti-host trust VENDOR.pub --for modules"), "\(verb): \(r.stderr)")
    }
  }

  @Test func aKeyDirectlyInTrustedKeysIsTrustedForNothingAndSaysSo() throws {
    _ = try module([], product: "com.vendor.pro")
    let vendor = try keygen("vendor")
    try FileManager.default.createDirectory(
      atPath: state + "/trusted-keys", withIntermediateDirectories: true)
    let stray = state + "/trusted-keys/vendor.pub"
    try FileManager.default.copyItem(atPath: vendor + ".pub", toPath: stray)
    try FileManager.default.createDirectory(atPath: state + "/licences", withIntermediateDirectories: true)
    try issue(
      vendor, product: "com.vendor.pro", expires: Self.instant(3600), to: state + "/licences/pro.licence")
    // Not trusted for licences: locked; and the start-up output says why and what to do.
    let r = try run(["--approve-all"])
    #expect(try reason(r) == "moduleLocked")
    #expect(r.stderr.contains("\(stray) is trusted for nothing"), "\(r.stderr)")
    #expect(r.stderr.contains("forsetti-host trust \(stray) --for licences|modules"), "\(r.stderr)")
    let explain = try HostBinary.run([
      "explain", "com.test.app", "--manifests", dir.url("manifests"), "--state", state,
    ])
    #expect(explain.stdout.contains("warning: \(stray) is trusted for nothing"), "\(explain.stdout)")
    #expect(try explainJSON([])["rolelessKeys"] == .strings([stray]))
    let list = try HostBinary.run(["trust", "--list", "--state", state, "--json"])
    let roleless = try JSONParser.parse(list.stdout).objectValue?["roleless"]?.arrayValue?.first?.objectValue
    #expect(roleless?["file"] == .string(stray), "\(list.stdout)")
    // The remedy the warning names works.
    let moved = try HostBinary.run(["trust", stray, "--for", "licences", "--state", state])
    #expect(moved.status == 0, "\(moved.stderr)")
    try FileManager.default.removeItem(atPath: stray)
    #expect(try run(["--approve-all"]).status == 0)
  }

  @Test func trustChecksTheKeyAndRefusesAConflictingName() throws {
    let vendor = try keygen("vendor")
    func trustRun(_ args: [String]) throws -> ProcessResult {
      try HostBinary.run(["trust"] + args + ["--state", state])
    }
    try dir.write("garbage.pub", "not a key at all\n")
    var r = try trustRun([dir.url("garbage.pub"), "--for", "modules"])
    #expect(r.status == 2)
    #expect(r.stderr.contains("not a Forsetti public key"), "\(r.stderr)")
    r = try trustRun([vendor + ".key", "--for", "modules"])  // the secret key: refused too
    #expect(r.status == 2)
    r = try trustRun([vendor + ".pub", "--for", "everything"])
    #expect(r.status == 2)
    #expect(r.stderr.contains("expected licences or modules"), "\(r.stderr)")
    r = try trustRun([vendor + ".pub"])
    #expect(r.status == 2)
    #expect(!FileManager.default.fileExists(atPath: state + "/trusted-keys/modules"))

    r = try trustRun([vendor + ".pub", "--for", "modules", "--json"])
    #expect(r.status == 0, "\(r.stderr)")
    let installed = try #require(try JSONParser.parse(r.stdout).objectValue)
    let target = state + "/trusted-keys/modules/vendor.pub"
    #expect(installed["installed"] == .string(target))
    #expect(installed["role"] == "modules")
    #expect(installed["result"] == "installed")
    let keyID = try #require(installed["keyID"]?.stringValue)
    #expect(try String(contentsOfFile: vendor + ".pub", encoding: .utf8).hasPrefix(keyID))
    let mode = try FileManager.default.attributesOfItem(atPath: target)[.posixPermissions] as? Int
    #expect(mode == 0o644)
    // The same key again: nothing to do.
    r = try trustRun([vendor + ".pub", "--for", "modules", "--json"])
    #expect(try JSONParser.parse(r.stdout).objectValue?["result"] == "alreadyTrusted")
    // Another key of the same name: refused, the trusted one left as it was.
    let before = try String(contentsOfFile: target, encoding: .utf8)
    try FileManager.default.createDirectory(atPath: dir.url("other"), withIntermediateDirectories: true)
    _ = try keygen("other/vendor")
    r = try trustRun([dir.url("other/vendor.pub"), "--for", "modules"])
    #expect(r.status == 2)
    #expect(r.stderr.contains("already holds a different key"), "\(r.stderr)")
    #expect(try String(contentsOfFile: target, encoding: .utf8) == before)
    let list = try #require(try JSONParser.parse(try trustRun(["--list", "--json"]).stdout).objectValue)
    #expect(list["modules"]?.arrayValue?.first?.objectValue?["keyID"] == .string(keyID))
    #expect(list["licences"] == .array([]))
  }

  @Test func verifyJSONSaysWhichKeyVerifiedIt() throws {
    _ = try module([])
    let so = dir.url("plugins/app_entry.so")
    let vendor = try keygen("vendor")
    func verify() throws -> (Int32, JSONObject) {
      let r = try HostBinary.run(["verify", so, "--state", state, "--json"])
      return (r.status, try #require(try JSONParser.parse(r.stdout).objectValue, "\(r.stderr)"))
    }
    var (status, o) = try verify()
    #expect(status == 1)
    #expect(o["result"] == "unsigned")
    #expect(o["file"] == .string(so))
    #expect(o["signature"] == .string(so + ".sig"))
    #expect(o["keyID"] == .null)
    #expect(try HostBinary.run(["sign", so, "--key", vendor + ".key"]).status == 0)
    // Trusted for licences only: not a module-signing key.
    try trust(vendor, for: "licences")
    (status, o) = try verify()
    #expect(status == 1)
    #expect(o["result"] == "untrustedKey")
    #expect(o["verifiedBy"] == .null)
    #expect(o["detail"]?.stringValue?.contains("trusted for licences only") == true, "\(o)")
    try trust(vendor, for: "modules")
    (status, o) = try verify()
    #expect(status == 0)
    #expect(o["result"] == "valid")
    #expect(o["verifiedBy"] == .string(state + "/trusted-keys/modules/vendor.pub"))
    #expect(o["keyID"]?.stringValue?.count == 16)
  }

  @Test func approvalsAndLicencesChangedWhileRunningTakeEffect() throws {
    let f = try module(["storage"], product: "com.vendor.pro")
    #expect(
      try HostBinary.run(["approve", "com.test.app", "--manifests", dir.url("manifests"), "--state", state])
        .status == 0)
    try dir.write(
      "manifests/app_entry.json",
      f.manifest(capabilities: ["storage", "telemetry"], extra: #","iapProductID":"com.vendor.pro""#))
    try issue(
      try trustVendorAndSign(), product: "com.vendor.pro", expires: Self.instant(3600),
      to: state + "/licences/pro.licence")

    let host = try DevHost.launch(
      [
        "run", "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state", state,
        "--for", "20",
      ])
    defer { host.stop() }
    #expect(host.await("telemetry: denied") != nil, "\(host.lines)")
    // Approving the added capability while the host runs restarts the module with it.
    #expect(
      try HostBinary.run(["approve", "com.test.app", "--manifests", dir.url("manifests"), "--state", state])
        .status == 0)
    #expect(host.await("restarted com.test.app with capabilities storage, telemetry") != nil, "\(host.lines)")
    #expect(host.await("telemetry: granted") != nil)
    // Removing the licence stops the module.
    try FileManager.default.removeItem(atPath: state + "/licences/pro.licence")
    #expect(host.await("moduleLocked: stopped: no longer unlocked") != nil, "\(host.lines)")
  }
}
