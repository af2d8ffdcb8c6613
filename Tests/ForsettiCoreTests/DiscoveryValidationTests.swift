import Testing

@testable import ForsettiCore

/// Manifests in memory, as discovery reads them from a directory.
private struct MemorySource: ManifestSource {
  var files: [String: String]

  func candidateFiles() throws(ManifestSourceError) -> [String] { Array(files.keys) }

  func read(_ relativePath: String, limit: Int) throws(ManifestSourceError) -> [UInt8] {
    guard let text = files[relativePath] else { throw .unreadable(path: relativePath, reason: "absent") }
    return Array(text.utf8)
  }
}

/// As upstream's loader, discovery refuses (`validationFailed`) a manifest whose default role is
/// not for its module type or lacks its capability, and one declaring an I/O without its
/// capability; such a module is then no provider of anything.
@Suite struct DiscoveryValidationTests {
  static func manifest(
    _ id: String, type: String, capabilities: [String], role: String? = nil, requirements: JSONValue? = nil
  ) -> String {
    var f = ManifestFixture([
      ("moduleID", .string(id)), ("moduleType", .string(type)),
      ("capabilitiesRequested", .strings(capabilities)),
      ("entryPoint", .string(id.replacingOccurrences(of: ".", with: "_"))),
    ])
    if let role { f = f.with("defaultModuleRole", .string(role)) }
    if let requirements {
      f = f.with("schemaVersion", "1.1").with("manifestTemplateVersion", "1.1").with(
        "runtimeRequirements", requirements)
    }
    return f.text
  }

  static func discover(_ files: [String: String], mode: DiscoveryMode = .fallback) throws -> DiscoveryReport {
    try ManifestDiscovery.discover(from: MemorySource(files: files), mode: mode)
  }

  /// The one file of `files`, discovered.
  static func only(_ text: String) throws -> DiscoveredFile {
    let report = try discover(["m.json": text])
    return try #require(report.files.first)
  }

  @Test func aUIModuleClaimingASharedDatabaseRoleIsValidationFailedNamingFieldValueAndRemedy() throws {
    let file = try Self.only(
      Self.manifest("com.test.uidb", type: "ui", capabilities: ["shared_database"], role: "shared_database"))
    #expect(file.outcome.reason == .validationFailed)
    #expect(file.moduleID == "com.test.uidb")
    #expect(
      file.outcome.detail
        == #"defaultModuleRole: "shared_database" is a role for service modules and this is a ui module: remove defaultModuleRole, or use "ui""#
    )
  }

  @Test func aServiceModuleClaimingTheUIRoleIsValidationFailed() throws {
    let file = try Self.only(Self.manifest("com.test.svcui", type: "service", capabilities: [], role: "ui"))
    #expect(file.outcome.reason == .validationFailed)
    #expect(file.outcome.detail.hasPrefix(#"defaultModuleRole: "ui" is a role for app or ui modules"#))
    #expect(file.outcome.detail.contains("this is a service module"))
  }

  @Test func aServiceRoleWithoutItsCapabilityIsValidationFailed() throws {
    let file = try Self.only(
      Self.manifest("com.test.nocap", type: "service", capabilities: ["storage"], role: "authentication"))
    #expect(file.outcome.reason == .validationFailed)
    #expect(
      file.outcome.detail
        == #"defaultModuleRole: "authentication" needs capability authentication in capabilitiesRequested: add "authentication" there, or remove defaultModuleRole"#
    )
  }

  @Test func anIORequirementWithoutItsCapabilityIsValidationFailed() throws {
    let requirements = ManifestFixture.runtimeRequirements(io: [
      ManifestFixture.io("notes", kind: "storage"), ManifestFixture.io("uploads", kind: "networking"),
    ])
    let file = try Self.only(
      Self.manifest("com.test.io", type: "service", capabilities: ["storage"], requirements: requirements))
    #expect(file.outcome.reason == .validationFailed)
    #expect(file.moduleID == "com.test.io")
    #expect(
      file.outcome.detail
        == #"runtimeRequirements.io[1].kind: "networking" needs capability networking in capabilitiesRequested: add "networking" there, or remove the requirement "uploads""#
    )
  }

  @Test func everyDisagreementIsReportedAtOnce() throws {
    let requirements = ManifestFixture.runtimeRequirements(io: [
      ManifestFixture.io("keys", kind: "secure_storage")
    ])
    let file = try Self.only(
      Self.manifest(
        "com.test.all", type: "app", capabilities: [], role: "security", requirements: requirements))
    guard case .invalid(.invalid(let e)) = file.outcome else {
      Issue.record("not refused: \(file.outcome)")
      return
    }
    #expect(
      e.issues.map(\.field) == ["defaultModuleRole", "defaultModuleRole", "runtimeRequirements.io[0].kind"])
  }

  @Test func agreeingRolesAndRequirementsAreDiscovered() throws {
    let requirements = ManifestFixture.runtimeRequirements(io: [
      ManifestFixture.io("db", kind: "shared_database")
    ])
    let report = try Self.discover([
      "db.json": Self.manifest(
        "com.test.db", type: "service", capabilities: ["shared_database"], role: "shared_database",
        requirements: requirements),
      "shell.json": Self.manifest("com.test.shell", type: "app", capabilities: [], role: "ui"),
    ])
    #expect(report.manifests.map(\.moduleID) == ["com.test.db", "com.test.shell"])
  }

  @Test func strictModeStopsAtTheRefusedManifest() throws {
    let report = try Self.discover(
      [
        "a.json": Self.manifest("com.test.a", type: "ui", capabilities: ["api"], role: "api"),
        "b.json": Self.manifest("com.test.b", type: "service", capabilities: []),
      ], mode: .strict)
    #expect(report.strictFailure?.file == "a.json")
    #expect(report.strictFailure?.outcome.reason == .validationFailed)
    #expect(report.files.count == 1)
  }

  /// The issue's case: a ui module claiming shared_database no longer provides it, so the
  /// consumer that requires the role is blocked; a service provider (the control) satisfies it.
  @Test(arguments: [("ui", false), ("service", true)])
  func aRefusedProviderProvidesNothing(providerType: String, consumerRuns: Bool) throws {
    let consumerNeeds = ManifestFixture.runtimeRequirements(
      mode: "framework_mediated_shared", requiredDefaultRoles: ["shared_database"])
    let report = try Self.discover([
      "provider.json": Self.manifest(
        "com.test.provider", type: providerType, capabilities: ["shared_database"], role: "shared_database"),
      "consumer.json": Self.manifest(
        "com.test.consumer", type: "service", capabilities: [], requirements: consumerNeeds),
    ])
    let consumer = try #require(report.manifests.first { $0.moduleID == "com.test.consumer" })
    let providers = ProviderAvailability(discovered: report.manifests)
    let outcome = RuntimeRequirementRules.check(consumer, providers: providers)
    if consumerRuns {
      #expect(outcome == .pass)
      #expect(
        RuntimeRequirementRules.passDetail(consumer, providers: providers).contains(
          "shared_database→com.test.provider"))
    } else {
      #expect(outcome.failureReason == .unsatisfiedRuntimeRequirement)
      #expect(
        outcome.failureDetail.contains(#"no discovered module holds defaultModuleRole "shared_database""#))
    }
  }

  /// The fast path declines nothing discovery must refuse: the verdict is the same without it.
  @Test func theVerdictIsTheSameWithAndWithoutTheFastPath() throws {
    let texts = [
      Self.manifest("com.test.uidb", type: "ui", capabilities: ["shared_database"], role: "shared_database"),
      Self.manifest("com.test.svcui", type: "service", capabilities: [], role: "ui"),
      Self.manifest("com.test.fine", type: "service", capabilities: ["api"], role: "api"),
    ]
    for text in texts {
      let bytes = Array(text.utf8)
      // These use the fast path's shape, so both decoders are exercised.
      #expect(ManifestFastPath.decode(bytes) != nil)
      let fast = ManifestDiscovery.judge(bytes: bytes, file: "m.json", mode: .fallback)
      let full = ManifestDiscovery.judge(bytes: bytes, file: "m.json", mode: .fallback, fastPath: false)
      #expect(fast == full)
    }
  }
}
