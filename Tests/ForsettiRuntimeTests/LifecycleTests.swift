import CForsetti
import ForsettiCore
import ForsettiRuntime
import ForsettiTestSupport
import Foundation
import Testing

/// Load, identity and start through a real ModuleManager with real C modules.
@Suite(.onTestThreads) struct LifecycleTests {
  static func logging(_ id: String, _ entry: String) -> ModuleFixture {
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.start = "fixture_log(\"start \(id)\"); return FORSETTI_OK;"
    f.stop = "fixture_log(\"stop \(id)\");"
    return f
  }

  @Test func providersStartBeforeConsumersAndStopAfterThem() throws {
    let h = RuntimeHarness()
    // IDs sort consumer-first, so only the role dependency can put the provider first.
    try Self.logging("com.test.aconsumer", "consumer_entry").install(
      in: h.dir,
      manifestExtra:
        #","manifestTemplateVersion":"1.1","runtimeRequirements":{"io":[],"dataIsolation":{"mode":"private_to_module","requiredDefaultRoles":["authentication"]}}"#
    )
    try Self.logging("com.test.bplain", "plain_entry").install(in: h.dir)
    try Self.logging("com.test.zprovider", "provider_entry").install(
      in: h.dir, capabilities: ["authentication"], manifestExtra: #","defaultModuleRole":"authentication""#)
    let m = try h.start()
    #expect(
      m.records.allSatisfy { $0.state == .started },
      "\(m.records.map { ($0.moduleID, $0.trace.firstFailure) })")
    m.stopAll()
    let events = h.log.all.compactMap { r in r.message.hasPrefix("st") && r.moduleID != nil ? r.message : nil
    }
    let starts = events.filter { $0.hasPrefix("start") }.map { String($0.dropFirst(6)) }
    let stops = events.filter { $0.hasPrefix("stop") }.map { String($0.dropFirst(5)) }
    #expect(starts.count == 3)
    let provider = try #require(starts.firstIndex(of: "com.test.zprovider"))
    let consumer = try #require(starts.firstIndex(of: "com.test.aconsumer"))
    #expect(provider < consumer)
    #expect(stops == Array(starts.reversed()))
    #expect(events.prefix(3).allSatisfy { $0.hasPrefix("start") })
    #expect(m.records.allSatisfy { $0.state == .stopped })
  }

  @Test func aFailingStartIsRecordedAndOthersStillRun() throws {
    let h = RuntimeHarness()
    var bad = Self.logging("com.test.bad", "bad_entry")
    bad.start = "fixture_log(\"start attempted\"); return FORSETTI_ERR_START_FAILED;"
    bad.stop = "fixture_log(\"stop must not run\");"
    try bad.install(in: h.dir)
    try Self.logging("com.test.good", "good_entry").install(in: h.dir)
    let m = try h.start()
    #expect(h.state("com.test.bad") == .failed(.startFailed))
    #expect(
      h.record("com.test.bad")?.trace.firstFailure?.detail.contains("FORSETTI_ERR_START_FAILED") == true)
    #expect(h.state("com.test.good") == .started)
    m.stopAll()
    #expect(h.lines("com.test.bad").contains("start attempted"))
    #expect(!h.lines("com.test.bad").contains("stop must not run"))
    #expect(h.state("com.test.bad") == .failed(.startFailed))
  }

  @Test func refusingAndIncompatibleTablesFailToLoad() throws {
    let h = RuntimeHarness()
    var null = ModuleFixture(moduleID: "com.test.null", entryPoint: "null_entry")
    null.entryBody = "return NULL;"
    try null.install(in: h.dir)
    var major = ModuleFixture(moduleID: "com.test.major", entryPoint: "major_entry")
    major.abiVersion = "FORSETTI_ABI_VERSION_MAKE(2, 0)"
    try major.install(in: h.dir)
    var minor = ModuleFixture(moduleID: "com.test.minor", entryPoint: "minor_entry")
    minor.abiVersion = "FORSETTI_ABI_VERSION_MAKE(1, 7)"
    try minor.install(in: h.dir)
    var small = ModuleFixture(moduleID: "com.test.small", entryPoint: "small_entry")
    small.tableSize = "8"
    try small.install(in: h.dir)
    try h.start()
    #expect(h.state("com.test.null") == .failed(.loadFailed))
    #expect(h.record("com.test.null")?.trace.firstFailure?.detail.contains("returned NULL") == true)
    #expect(h.state("com.test.major") == .failed(.abiUnsupported))
    #expect(h.record("com.test.major")?.trace.firstFailure?.detail.contains("module ABI 2.0") == true)
    #expect(h.state("com.test.minor") == .failed(.abiUnsupported))
    #expect(h.state("com.test.small") == .failed(.abiUnsupported))
    for id in ["com.test.null", "com.test.major", "com.test.minor", "com.test.small"] {
      #expect(h.record(id)?.trace.firstFailure?.step == .load, "\(id)")
    }
  }

  /// A library the module needs, gone: judged before any load (issue 41), the module is blocked
  /// at the binary step naming the library, and no dlopen is tried.
  @Test func aMissingLibraryIsBlockedBeforeAnyLoad() throws {
    let h = RuntimeHarness()
    try CFixture.sharedObject("libdep.so", source: "int dep_value(void) { return 7; }\n", in: h.dir)
    var f = ModuleFixture(moduleID: "com.test.needsdep", entryPoint: "needsdep_entry")
    f.prelude = "extern int dep_value(void);"
    f.start = "return dep_value() == 7 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;"
    try f.install(in: h.dir, ccFlags: ["-L", h.dir.path, "-Wl,--no-as-needed", "-ldep"])
    try FileManager.default.removeItem(atPath: h.dir.url("libdep.so"))
    try h.start()
    #expect(h.state("com.test.needsdep") == .blocked(.binaryIncompatible))
    let failure = h.record("com.test.needsdep")?.trace.firstFailure
    #expect(failure?.step == .inspectBinary)
    #expect(failure?.detail.contains("libdep.so, needed by") == true, "\(failure?.detail ?? "")")
    #expect(failure?.detail.contains("is not on this system") == true)
  }

  @Test func aDescriptorThatDisagreesIsNeverStarted() throws {
    let h = RuntimeHarness()
    var f = Self.logging("com.test.honest", "liar_entry")
    f.descriptorID = "com.test.someoneelse"
    try f.install(in: h.dir)
    var g = Self.logging("com.test.typed", "typed_entry")
    g.type = "ui"
    try g.install(in: h.dir)
    // The manifest says service; the descriptor says ui.
    try h.dir.write(
      "manifests/typed_entry.json",
      ModuleFixture(moduleID: "com.test.typed", entryPoint: "typed_entry").manifest())
    try h.start()
    #expect(h.state("com.test.honest") == .failed(.moduleIdentityMismatch))
    let detail = h.record("com.test.honest")?.trace.firstFailure?.detail ?? ""
    #expect(detail.contains("manifest \"com.test.honest\", module says \"com.test.someoneelse\""))
    #expect(h.state("com.test.typed") == .failed(.moduleIdentityMismatch))
    #expect(h.record("com.test.typed")?.trace.firstFailure?.detail.contains("moduleType") == true)
    #expect(!h.lines("com.test.honest").contains { $0.hasPrefix("start") })
    #expect(!h.lines("com.test.typed").contains { $0.hasPrefix("start") })
  }
}
