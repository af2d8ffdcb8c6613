import ForsettiCore
import Foundation
import Testing

/// A real directory under NSTemporaryDirectory, removed when released.
private final class ScratchManifestDirectory {
  let path: String

  init() throws {
    path = (NSTemporaryDirectory() as NSString).appendingPathComponent(
      "forsetti-discovery-\(UUID().uuidString)")
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
  }

  deinit { try? FileManager.default.removeItem(atPath: path) }

  /// Writes `text` at `relative`, creating intermediate directories.
  func write(_ relative: String, _ text: String) throws {
    let full = (path as NSString).appendingPathComponent(relative)
    try FileManager.default.createDirectory(
      atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    try Data(text.utf8).write(to: URL(fileURLWithPath: full))
  }

  /// Writes a valid manifest for `moduleID` at `relative`.
  func manifest(
    _ relative: String, id: String, displayName: String = "Notes", _ overrides: [(String, JSONValue?)] = []
  )
    throws
  {
    try write(
      relative,
      ManifestFixture([("moduleID", .string(id)), ("displayName", .string(displayName))] + overrides).text)
  }

  func discover(_ mode: DiscoveryMode = .fallback) throws -> DiscoveryReport {
    try ManifestDiscovery.discover(from: DirectoryManifestSource(root: path), mode: mode)
  }
}

extension DiscoveryReport {
  fileprivate func entry(_ file: String, sourceLocation: SourceLocation = #_sourceLocation) throws
    -> DiscoveredFile
  {
    try #require(
      files.first { $0.file == file }, "no entry for \(file) in \(files.map(\.file))",
      sourceLocation: sourceLocation)
  }
}

private let nonManifest = #"{"name": "some-package", "version": "1.0.0", "dependencies": {}}"#

@Suite("ManifestDiscovery: fallback mode")
struct FallbackDiscoveryTests {
  @Test("files are ordered by the bytes of their names, ASCII or not")
  func bytewiseOrder() throws {
    let ascii = try ScratchManifestDirectory()
    try ascii.manifest("z.json", id: "com.example.z")
    try ascii.manifest("a.json", id: "com.example.a")
    try ascii.manifest("Z.json", id: "com.example.upper")
    try ascii.manifest("a-b.json", id: "com.example.ab")
    #expect(try ascii.discover().files.map(\.file) == ["Z.json", "a-b.json", "a.json", "z.json"])
    // With a non-ASCII name, "é" (0xC3 0xA9) sorts after every ASCII byte.
    let mixed = try ScratchManifestDirectory()
    try mixed.manifest("é.json", id: "com.example.e")
    try mixed.manifest("z.json", id: "com.example.z")
    try mixed.manifest("Z.json", id: "com.example.upper")
    #expect(try mixed.discover().files.map(\.file) == ["Z.json", "z.json", "é.json"])
  }

  @Test("valid manifests are found in sorted file order")
  func findsManifests() throws {
    let dir = try ScratchManifestDirectory()
    try dir.manifest("b.json", id: "com.example.b")
    try dir.manifest("a.json", id: "com.example.a")
    let report = try dir.discover()
    #expect(report.files.map(\.file) == ["a.json", "b.json"])
    #expect(report.manifests.map(\.moduleID) == ["com.example.a", "com.example.b"])
    #expect(report.strictFailure == nil)
    #expect(try report.entry("a.json").moduleID == "com.example.a")
  }

  @Test("JSON without any manifest root key is ignored")
  func ignoresNonManifest() throws {
    let dir = try ScratchManifestDirectory()
    try dir.write("package.json", nonManifest)
    try dir.write("list.json", #"["schemaVersion", "moduleID"]"#)
    try dir.manifest("notes.json", id: "com.example.notes")
    let report = try dir.discover()
    #expect(try report.entry("package.json").outcome == .ignored)
    #expect(try report.entry("list.json").outcome == .ignored)
    #expect(try report.entry("package.json").outcome.reason == nil)
    #expect(report.manifests.map(\.moduleID) == ["com.example.notes"])
  }

  @Test("invalid JSON is reported as invalidJSON with its location, and discovery keeps going")
  func reportsInvalidJSON() throws {
    let dir = try ScratchManifestDirectory()
    try dir.write("a-broken.json", "{\n  \"moduleID\": \"com.example.a\",\n}")
    try dir.manifest("b-notes.json", id: "com.example.notes")
    let report = try dir.discover()
    let broken = try report.entry("a-broken.json")
    #expect(broken.outcome.reason == .invalidJSON)
    guard case .invalid(.invalidJSON(let e)) = broken.outcome else {
      Issue.record("expected invalidJSON, got \(broken.outcome)")
      return
    }
    #expect((e.line, e.column) == (3, 1))
    #expect(broken.outcome.detail.hasPrefix("invalid JSON at line 3, column 1"))
    #expect(report.manifests.map(\.moduleID) == ["com.example.notes"])
    #expect(report.strictFailure == nil)
  }

  @Test("a JSON file with manifest keys but missing fields is validationFailed and keeps its declared ID")
  func reportsInvalidManifest() throws {
    let dir = try ScratchManifestDirectory()
    try dir.write("half.json", #"{"moduleID": "com.example.half", "displayName": "Half"}"#)
    let entry = try dir.discover().entry("half.json")
    #expect(entry.outcome.reason == .validationFailed)
    #expect(entry.moduleID == "com.example.half")
    guard case .invalid(.invalid(let e)) = entry.outcome else {
      Issue.record("expected a validation error, got \(entry.outcome)")
      return
    }
    #expect(e.issues.map(\.field).contains("entryPoint"))
  }

  @Test("manifests in nested directories are found with their relative paths")
  func nested() throws {
    let dir = try ScratchManifestDirectory()
    try dir.manifest("vendor/notes/manifest.json", id: "com.example.notes")
    try dir.manifest("vendor/a/b/c/deep.json", id: "com.example.deep")
    try dir.manifest("top.json", id: "com.example.top")
    let report = try dir.discover()
    #expect(report.files.map(\.file) == ["top.json", "vendor/a/b/c/deep.json", "vendor/notes/manifest.json"])
    #expect(
      Set(report.manifests.map(\.moduleID)) == ["com.example.notes", "com.example.deep", "com.example.top"])
  }

  @Test("JSON Schema documents, hidden files, hidden directories and other extensions are skipped")
  func skipped() throws {
    let dir = try ScratchManifestDirectory()
    try dir.manifest("forsetti-manifest.schema.json", id: "com.example.schema")
    try dir.manifest(".hidden.json", id: "com.example.hidden")
    try dir.manifest(".git/inside.json", id: "com.example.git")
    try dir.manifest("sub/.cache/inside.json", id: "com.example.cache")
    try dir.manifest("notes.json.bak", id: "com.example.bak")
    try dir.manifest("notes.txt", id: "com.example.txt")
    try FileManager.default.createDirectory(
      atPath: (dir.path as NSString).appendingPathComponent("folder.json"), withIntermediateDirectories: true)
    try dir.manifest("real.json", id: "com.example.real")
    let report = try dir.discover()
    #expect(report.files.map(\.file) == ["real.json"])
  }

  @Test("a file over 1 MiB is refused before parsing; exactly 1 MiB is read")
  func oversize() throws {
    let limit = ManifestDiscovery.maxManifestBytes
    #expect(limit == 1_048_576)
    let dir = try ScratchManifestDirectory()
    let base = ManifestFixture([("moduleID", "com.example.big")]).text
    try dir.write("at-limit.json", base + String(repeating: " ", count: limit - base.utf8.count))
    let big = ManifestFixture([("moduleID", "com.example.bigger")]).text
    try dir.write("over-limit.json", big + String(repeating: " ", count: limit + 1 - big.utf8.count))
    let report = try dir.discover()
    #expect(
      try report.entry("over-limit.json").outcome
        == .unreadable(.tooLarge(path: "over-limit.json", limit: limit)))
    #expect(try report.entry("over-limit.json").outcome.reason == .validationFailed)
    #expect(try report.entry("over-limit.json").outcome.detail.contains("larger than 1048576 bytes"))
    #expect(report.manifests.map(\.moduleID) == ["com.example.big"])
  }

  @Test("a missing directory is notADirectory")
  func missingDirectory() throws {
    let path = (NSTemporaryDirectory() as NSString).appendingPathComponent(
      "forsetti-none-\(UUID().uuidString)")
    #expect(throws: ManifestSourceError.notADirectory(path)) {
      try ManifestDiscovery.discover(from: DirectoryManifestSource(root: path))
    }
  }

  @Test("a regular file is notADirectory")
  func fileInsteadOfDirectory() throws {
    let dir = try ScratchManifestDirectory()
    try dir.manifest("one.json", id: "com.example.one")
    let file = (dir.path as NSString).appendingPathComponent("one.json")
    #expect(throws: ManifestSourceError.notADirectory(file)) {
      try ManifestDiscovery.discover(from: DirectoryManifestSource(root: file))
    }
  }
}

@Suite("ManifestDiscovery: duplicates")
struct DuplicateDiscoveryTests {
  @Test(
    "a duplicate moduleID is duplicateModuleID and the alphabetically first file wins, whatever the creation order",
    arguments: [false, true])
  func duplicate(_ createFirstFileLast: Bool) throws {
    let dir = try ScratchManifestDirectory()
    let names = ["m-first.json", "n-second.json", "z-third.json"]
    for name in createFirstFileLast ? names.reversed() : names {
      try dir.manifest(name, id: "com.example.dup", displayName: name)
      Thread.sleep(forTimeInterval: 0.01)
    }
    let report = try dir.discover()
    #expect(report.manifests.map(\.displayName) == ["m-first.json"])
    for name in names.dropFirst() {
      let entry = try report.entry(name)
      #expect(entry.outcome == .duplicate(moduleID: "com.example.dup", firstFile: "m-first.json"))
      #expect(entry.outcome.reason == .duplicateModuleID)
      #expect(entry.moduleID == "com.example.dup")
      #expect(entry.outcome.detail == "moduleID com.example.dup is already declared by m-first.json")
    }
  }

  @Test("an invalid manifest does not claim its moduleID")
  func invalidDoesNotClaim() throws {
    let dir = try ScratchManifestDirectory()
    try dir.manifest("a.json", id: "com.example.dup", [("entryPoint", "not valid")])
    try dir.manifest("b.json", id: "com.example.dup")
    let report = try dir.discover()
    #expect(try report.entry("a.json").outcome.reason == .validationFailed)
    #expect(report.manifests.map(\.moduleID) == ["com.example.dup"])
    #expect(try report.entry("b.json").outcome.reason == nil)
  }

  @Test("duplicates across nested directories are judged by full relative path")
  func nestedDuplicate() throws {
    let dir = try ScratchManifestDirectory()
    try dir.manifest("b/manifest.json", id: "com.example.dup", displayName: "B")
    try dir.manifest("a/manifest.json", id: "com.example.dup", displayName: "A")
    let report = try dir.discover()
    #expect(report.manifests.map(\.displayName) == ["A"])
    #expect(
      try report.entry("b/manifest.json").outcome
        == .duplicate(moduleID: "com.example.dup", firstFile: "a/manifest.json"))
  }
}

@Suite("ManifestDiscovery: strict mode")
struct StrictDiscoveryTests {
  @Test("strict mode stops at the first bad file")
  func stopsAtFirstBad() throws {
    let dir = try ScratchManifestDirectory()
    try dir.manifest("a-good.json", id: "com.example.a")
    try dir.write("b-broken.json", #"{"moduleID": "#)
    try dir.manifest("c-good.json", id: "com.example.c")
    let report = try dir.discover(.strict)
    #expect(report.files.map(\.file) == ["a-good.json", "b-broken.json"])
    #expect(report.strictFailure?.file == "b-broken.json")
    #expect(report.strictFailure?.outcome.reason == .invalidJSON)
    #expect(report.manifests.map(\.moduleID) == ["com.example.a"])
  }

  @Test("in strict mode non-manifest JSON is a failure, not ignored")
  func nonManifestFails() throws {
    let dir = try ScratchManifestDirectory()
    try dir.write("package.json", nonManifest)
    try dir.manifest("z.json", id: "com.example.z")
    let report = try dir.discover(.strict)
    let stop = try #require(report.strictFailure)
    #expect(stop.file == "package.json")
    #expect(stop.outcome.reason == .validationFailed)
    guard case .invalid(.invalid(let e)) = stop.outcome else {
      Issue.record("expected a validation error, got \(stop.outcome)")
      return
    }
    #expect(e.issues.map(\.field) == ["(root)"])
    #expect(report.manifests.isEmpty)
  }

  @Test("strict mode stops at a duplicate")
  func stopsAtDuplicate() throws {
    let dir = try ScratchManifestDirectory()
    try dir.manifest("a.json", id: "com.example.dup")
    try dir.manifest("b.json", id: "com.example.dup")
    try dir.manifest("c.json", id: "com.example.c")
    let report = try dir.discover(.strict)
    #expect(report.strictFailure?.file == "b.json")
    #expect(report.strictFailure?.outcome.reason == .duplicateModuleID)
    #expect(report.files.count == 2)
  }

  @Test("strict mode stops at an oversize file")
  func stopsAtOversize() throws {
    let dir = try ScratchManifestDirectory()
    try dir.write("big.json", "[" + String(repeating: " ", count: ManifestDiscovery.maxManifestBytes) + "]")
    try dir.manifest("c.json", id: "com.example.c")
    let report = try dir.discover(.strict)
    #expect(report.strictFailure?.file == "big.json")
  }

  @Test("a clean directory passes strict mode")
  func clean() throws {
    let dir = try ScratchManifestDirectory()
    try dir.manifest("a.json", id: "com.example.a")
    try dir.manifest("b.json", id: "com.example.b")
    let report = try dir.discover(.strict)
    #expect(report.strictFailure == nil)
    #expect(report.manifests.count == 2)
  }
}

// MARK: - Gate stack

private let permissive = GateContext(
  approvals: ApprovalLedger(approveAll: true), entitlements: AllowAllEntitlementProvider())

private func notInspected(_: ModuleManifest) -> BinaryInspectionStep { .skipped("no plugin directory") }

@Suite("GateStack.judge")
struct GateStackTests {
  @Test("each file gets a full trace; the first failure blocks and later steps are skipped")
  func traces() throws {
    let dir = try ScratchManifestDirectory()
    try dir.write("a-broken.json", "{")
    try dir.manifest("b-good.json", id: "com.example.good")
    try dir.manifest("c-dup.json", id: "com.example.good")
    try dir.manifest("d-ios.json", id: "com.example.ios", [("supportedPlatforms", ["iOS"])])
    try dir.write("e-package.json", nonManifest)
    let report = try dir.discover()
    let judgements = GateStack.judge(
      report, context: permissive, inspect: notInspected, laterSteps: "not loaded")

    #expect(judgements.map(\.file) == ["a-broken.json", "b-good.json", "c-dup.json", "d-ios.json"])
    for j in judgements { #expect(j.trace.entries.map(\.step) == GateStep.allCases, "\(j.file)") }

    let broken = judgements[0]
    #expect(broken.reason == .invalidJSON)
    #expect(broken.manifest == nil)
    #expect(
      broken.trace.entries.map(\.verdict) == [GateVerdict.fail]
        + Array(repeating: GateVerdict.skipped, count: 8))

    let good = judgements[1]
    #expect(good.passed)
    #expect(good.reason == nil)
    #expect(good.moduleID == "com.example.good")
    #expect(
      good.trace.entries.map(\.verdict) == [
        .pass, .skipped, .pass, .pass, .pass, .pass, .skipped, .skipped, .skipped,
      ])
    #expect(good.trace.entries[1].detail == "no plugin directory")
    #expect(good.trace.entries.suffix(3).allSatisfy { $0.detail == "not loaded" })

    let dup = judgements[2]
    #expect(dup.reason == .duplicateModuleID)
    #expect(dup.moduleID == "com.example.good")
    #expect(dup.trace.firstFailure?.step == .discover)
    #expect(dup.trace.firstFailure?.detail.contains("b-good.json") == true)

    let ios = judgements[3]
    #expect(ios.reason == .unsupportedPlatform)
    #expect(ios.trace.firstFailure?.step == .compatibility)
    #expect(
      ios.trace.entries.map(\.verdict) == [GateVerdict.pass, .skipped, .fail]
        + Array(repeating: GateVerdict.skipped, count: 6))
    #expect(
      ios.trace.entries.dropFirst(3).allSatisfy {
        $0.detail.contains("compatibility failed with unsupportedPlatform")
      })
    #expect(ios.trace.entries.dropFirst(3).allSatisfy { $0.reason == nil })
  }

  @Test("a failing binary inspection blocks before compatibility is evaluated")
  func inspectionBlocks() throws {
    let dir = try ScratchManifestDirectory()
    try dir.manifest("ios.json", id: "com.example.ios", [("supportedPlatforms", ["iOS"])])
    let judgements = GateStack.judge(
      try dir.discover(), context: permissive,
      inspect: { _ in
        .outcome(.fail(.init(.entryPointMissing, "symbol notes_module_entry not in .dynsym")), passDetail: "")
      },
      laterSteps: "not loaded")
    let j = try #require(judgements.first)
    #expect(j.reason == .entryPointMissing)
    #expect(j.trace.firstFailure?.step == .inspectBinary)
    #expect(j.trace.entries.map(\.step) == GateStep.allCases)
    #expect(j.trace.entries.first { $0.step == .compatibility }?.verdict == .skipped)
  }

  @Test("a passing binary inspection is recorded with its detail")
  func inspectionPasses() throws {
    let dir = try ScratchManifestDirectory()
    try dir.manifest("notes.json", id: "com.example.notes")
    let judgements = GateStack.judge(
      try dir.discover(), context: permissive,
      inspect: { _ in .outcome(.pass, passDetail: "ELF x86_64, symbol found") },
      laterSteps: "not loaded")
    let j = try #require(judgements.first)
    #expect(j.passed)
    #expect(
      j.trace.entries[1]
        == GateEntry(step: .inspectBinary, verdict: .pass, detail: "ELF x86_64, symbol found"))
  }

  @Test("without laterSteps a passing module's trace ends at runtimeRequirements, for the loader to continue")
  func noLaterSteps() throws {
    let dir = try ScratchManifestDirectory()
    try dir.manifest("notes.json", id: "com.example.notes")
    let judgements = GateStack.judge(
      try dir.discover(), context: permissive, inspect: notInspected, laterSteps: nil)
    let j = try #require(judgements.first)
    #expect(j.passed)
    #expect(
      j.trace.entries.map(\.step) == [
        .discover, .inspectBinary, .compatibility, .approval, .entitlement, .runtimeRequirements,
      ])
  }

  @Test("the default context blocks first-run approvals and paid modules")
  func defaultContext() throws {
    let dir = try ScratchManifestDirectory()
    try dir.manifest("a.json", id: "com.example.a", [("capabilitiesRequested", ["storage"])])
    try dir.manifest(
      "b.json", id: "com.example.b", [("capabilitiesRequested", []), ("iapProductID", "com.example.b.pro")])
    let judgements = GateStack.judge(
      try dir.discover(), context: GateContext(), inspect: notInspected, laterSteps: "-")
    #expect(judgements.map(\.reason) == [.approvalPending, .moduleLocked])
  }
}

@Suite("GateEvaluator")
struct GateEvaluatorTests {
  @Test("a manifest failing both compatibility and entitlement reports compatibility")
  func compatibilityBeforeEntitlement() {
    let m = ManifestModel.make(platforms: [.iOS], capabilities: [], product: "com.example.notes.pro")
    var trace = GateTrace()
    #expect(!GateEvaluator.evaluatePreLoad(m, GateContext(), into: &trace))
    #expect(trace.firstFailure?.reason == .unsupportedPlatform)
    #expect(trace.entries.first { $0.step == .entitlement }?.verdict == .skipped)
    #expect(trace.entries.filter { $0.verdict == .fail }.count == 1)

    var fixed = m
    fixed.supportedPlatforms = [.linux]
    var second = GateTrace()
    #expect(!GateEvaluator.evaluatePreLoad(fixed, GateContext(), into: &second))
    #expect(second.firstFailure?.reason == .moduleLocked)
  }

  @Test("approval is decided before entitlement")
  func approvalBeforeEntitlement() {
    let m = ManifestModel.make(capabilities: [.storage], product: "com.example.notes.pro")
    var trace = GateTrace()
    GateEvaluator.evaluatePreLoad(m, GateContext(), into: &trace)
    #expect(trace.firstFailure?.reason == .approvalPending)
    #expect(trace.entries.first { $0.step == .entitlement }?.verdict == .skipped)
  }

  @Test("entitlement is decided before runtime requirements")
  func entitlementBeforeRuntimeRequirements() {
    let m = ManifestModel.make(type: .service, product: "com.example.notes.pro", role: .ui)
    var trace = GateTrace()
    GateEvaluator.evaluatePreLoad(m, GateContext(), into: &trace)
    #expect(trace.firstFailure?.reason == .moduleLocked)
    var unlocked = GateTrace()
    GateEvaluator.evaluatePreLoad(
      m, GateContext(entitlements: AllowAllEntitlementProvider()), into: &unlocked)
    #expect(unlocked.firstFailure?.reason == .unsatisfiedRuntimeRequirement)
    #expect(unlocked.firstFailure?.step == .runtimeRequirements)
  }

  @Test("a passing manifest records steps 3 to 6 as passed and nothing else")
  func allPass() {
    var trace = GateTrace()
    #expect(GateEvaluator.evaluatePreLoad(ManifestModel.make(), GateContext(), into: &trace))
    #expect(trace.entries.map(\.step) == [.compatibility, .approval, .entitlement, .runtimeRequirements])
    #expect(trace.entries.allSatisfy { $0.verdict == .pass })
    #expect(trace.entries[1].detail == "no capabilities requested")
    #expect(trace.entries[2].detail == "free module (no iapProductID)")
  }

  @Test("after a failure only the later steps are marked skipped, in order")
  func skipsOnlyLaterSteps() {
    var trace = GateTrace()
    GateEvaluator.evaluatePreLoad(ManifestModel.make(platforms: [.macOS]), GateContext(), into: &trace)
    #expect(
      trace.entries.map(\.step) == [
        .compatibility, .approval, .entitlement, .runtimeRequirements, .load, .identityAndUI, .start,
      ])
  }
}

@Suite("GateTrace")
struct GateTraceTests {
  @Test("the first failing entry is the one that blocks")
  func firstFailure() {
    var trace = GateTrace()
    trace.pass(.discover, "ok")
    #expect(trace.passed)
    trace.fail(.compatibility, .unsupportedPlatform, "first")
    trace.fail(.approval, .approvalPending, "second")
    #expect(!trace.passed)
    #expect(
      trace.firstFailure
        == GateEntry(step: .compatibility, verdict: .fail, reason: .unsupportedPlatform, detail: "first"))
  }

  @Test("skipRemaining stops at the given step")
  func skipThrough() {
    var trace = GateTrace()
    trace.pass(.discover, "ok")
    trace.skipRemaining(through: .runtimeRequirements, because: "check only")
    #expect(
      trace.entries.map(\.step) == [
        .discover, .inspectBinary, .compatibility, .approval, .entitlement, .runtimeRequirements,
      ])
    #expect(trace.entries.dropFirst().allSatisfy { $0.verdict == .skipped && $0.detail == "check only" })
  }

  @Test("the steps are ordered as the contract says")
  func stepOrder() {
    #expect(
      GateStep.allCases == [
        .discover, .inspectBinary, .compatibility, .approval, .entitlement, .runtimeRequirements, .load,
        .identityAndUI,
        .start,
      ])
    #expect(GateStep.allCases.sorted() == GateStep.allCases)
  }
}
