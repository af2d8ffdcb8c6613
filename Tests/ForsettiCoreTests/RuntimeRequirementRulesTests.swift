import ForsettiCore
import Testing

private func io(_ id: String, _ kind: IOKind, required: Bool = true) -> IORequirement {
  IORequirement(requirementID: id, kind: kind, access: .read, required: required)
}

private func consumer(
  type: ModuleType = .service, capabilities: [Capability], io: [IORequirement] = [],
  mode: DataIsolationMode = .privateToModule, roles: [DefaultModuleRole] = []
) -> ModuleManifest {
  ManifestModel.make(
    "com.example.consumer", type: type, template: "1.1", capabilities: capabilities,
    requirements: RuntimeRequirements(
      io: io, dataIsolation: DataIsolation(mode: mode, requiredDefaultRoles: roles)))
}

/// A discovered service module holding `role` (with the capability the role needs).
private func provider(_ id: String, role: DefaultModuleRole, type: ModuleType = .service) -> ModuleManifest {
  ManifestModel.make(id, type: type, capabilities: role.requiredCapability.map { [$0] } ?? [], role: role)
}

/// No host services at all, so only discovered modules can provide.
private let bareHost = ProviderAvailability(hostServices: [], roleProviders: [:])

@Suite("RuntimeRequirementRules: I/O")
struct RuntimeRequirementIOTests {
  @Test("a manifest without runtimeRequirements passes")
  func none() {
    #expect(RuntimeRequirementRules.check(ManifestModel.make(), providers: bareHost) == .pass)
  }

  @Test("an io kind without its capability is unsatisfiedRuntimeRequirement naming entry and capability")
  func kindWithoutCapability() {
    let m = consumer(
      capabilities: [.storage], io: [io("files", .storage), io("uploads", .networking, required: false)])
    let outcome = RuntimeRequirementRules.check(m, providers: .init())
    #expect(outcome.failureReason == .unsatisfiedRuntimeRequirement)
    #expect(
      outcome.failureDetail
        == "runtimeRequirements.io[1] (uploads): kind networking needs capability networking in capabilitiesRequested"
    )
  }

  @Test("every io kind needs the capability of the same name", arguments: IOKind.allCases)
  func everyKindNeedsItsCapability(_ kind: IOKind) {
    let withCap = consumer(capabilities: [kind.capability], io: [io("x", kind, required: false)])
    #expect(RuntimeRequirementRules.check(withCap, providers: bareHost) == .pass)
    let others = Capability.allCases.filter { $0 != kind.capability }
    let without = consumer(capabilities: others, io: [io("x", kind, required: false)])
    let outcome = RuntimeRequirementRules.check(without, providers: bareHost)
    #expect(outcome.failureReason == .unsatisfiedRuntimeRequirement)
    #expect(outcome.failureDetail.contains("needs capability \(kind.rawValue)"))
  }

  @Test("a required io without a host service is unsatisfied")
  func requiredWithoutHostService() {
    let m = consumer(capabilities: [.networking], io: [io("api-calls", .networking)])
    let outcome = RuntimeRequirementRules.check(
      m, providers: ProviderAvailability(hostServices: [.storage, .telemetry]))
    #expect(outcome.failureReason == .unsatisfiedRuntimeRequirement)
    #expect(
      outcome.failureDetail.contains(
        "runtimeRequirements.io[0] (api-calls): required networking has no provider"))
    #expect(!outcome.failureDetail.contains("defaultModuleRole"))
  }

  @Test("a required io with a host service passes")
  func requiredWithHostService() {
    let m = consumer(capabilities: [.networking], io: [io("api-calls", .networking)])
    #expect(
      RuntimeRequirementRules.check(m, providers: ProviderAvailability(hostServices: [.networking])) == .pass)
  }

  @Test("the default host serves storage and telemetry")
  func defaultHostServices() {
    #expect(ProviderAvailability.defaultHostServices == [.storage, .telemetry, .secureStorage, .fileExport])
    let m = consumer(
      capabilities: [.storage, .telemetry], io: [io("files", .storage), io("events", .telemetry)])
    #expect(RuntimeRequirementRules.check(m, providers: ProviderAvailability()) == .pass)
  }

  @Test("a required role kind is satisfied by a discovered module holding that role")
  func roleKindByDiscoveredModule() {
    let m = consumer(capabilities: [.authentication], io: [io("login", .authentication)])
    let missing = RuntimeRequirementRules.check(m, providers: bareHost)
    #expect(missing.failureReason == .unsatisfiedRuntimeRequirement)
    #expect(missing.failureDetail.contains(#"no discovered module holds defaultModuleRole "authentication""#))

    let available = ProviderAvailability(
      hostServices: [], discovered: [provider("com.example.auth", role: .authentication)])
    #expect(available.provider(for: .authentication) == "com.example.auth")
    #expect(RuntimeRequirementRules.check(m, providers: available) == .pass)
  }

  @Test("a discovered module with a different role does not provide")
  func otherRoleDoesNotProvide() {
    let m = consumer(capabilities: [.authentication], io: [io("login", .authentication)])
    let available = ProviderAvailability(
      hostServices: [], discovered: [provider("com.example.diag", role: .diagnostics)])
    #expect(
      RuntimeRequirementRules.check(m, providers: available).failureReason == .unsatisfiedRuntimeRequirement)
  }

  @Test("a role kind is also satisfied by a host service")
  func roleKindByHostService() {
    let m = consumer(capabilities: [.api], io: [io("calls", .api)])
    let host = ProviderAvailability(hostServices: [.api])
    #expect(host.provider(for: .api) == "host service")
    #expect(RuntimeRequirementRules.check(m, providers: host) == .pass)
  }

  @Test("non-role kinds cannot be provided by a module")
  func nonRoleKind() {
    #expect(IOKind.networking.providingRole == nil)
    #expect(IOKind.fileExport.providingRole == nil)
    #expect(IOKind.sharedDatabase.providingRole == .sharedDatabase)
  }

  @Test("an optional io without a provider passes")
  func optionalWithoutProvider() {
    let m = consumer(
      capabilities: [.networking, .security],
      io: [io("net", .networking, required: false), io("sec", .security, required: false)])
    #expect(RuntimeRequirementRules.check(m, providers: bareHost) == .pass)
  }

  @Test("every unmet requirement is named in one violation")
  func allProblems() {
    let m = consumer(capabilities: [], io: [io("net", .networking), io("files", .fileExport)])
    let outcome = RuntimeRequirementRules.check(m, providers: bareHost)
    let parts = outcome.failureDetail.components(separatedBy: "; ")
    #expect(parts.count == 4)
    #expect(parts.allSatisfy { $0.hasPrefix("runtimeRequirements.io[") })
  }
}

@Suite("RuntimeRequirementRules: data isolation and roles")
struct RuntimeRequirementIsolationTests {
  @Test("framework_mediated_shared needs a shared_database provider")
  func sharedNeedsProvider() {
    let m = consumer(capabilities: [], mode: .frameworkMediatedShared)
    let outcome = RuntimeRequirementRules.check(m, providers: bareHost)
    #expect(outcome.failureReason == .unsatisfiedRuntimeRequirement)
    #expect(outcome.failureDetail.contains("framework_mediated_shared needs a shared_database provider"))
  }

  @Test("framework_mediated_shared passes with a discovered shared_database module")
  func sharedWithModule() {
    let m = consumer(capabilities: [], mode: .frameworkMediatedShared)
    let available = ProviderAvailability(
      hostServices: [], discovered: [provider("com.example.db", role: .sharedDatabase)])
    #expect(RuntimeRequirementRules.check(m, providers: available) == .pass)
  }

  @Test("framework_mediated_shared passes with a shared_database host service")
  func sharedWithHostService() {
    let m = consumer(capabilities: [], mode: .frameworkMediatedShared)
    #expect(
      RuntimeRequirementRules.check(m, providers: ProviderAvailability(hostServices: [.sharedDatabase]))
        == .pass)
  }

  @Test("private_to_module needs no provider")
  func privateNeedsNothing() {
    #expect(
      RuntimeRequirementRules.check(consumer(capabilities: [], mode: .privateToModule), providers: bareHost)
        == .pass)
  }

  @Test("requiredDefaultRoles need a discovered module holding each role")
  func requiredRoles() {
    let m = consumer(capabilities: [], roles: [.diagnostics, .security])
    let onlyDiagnostics = ProviderAvailability(
      hostServices: [], discovered: [provider("com.example.diag", role: .diagnostics)])
    let outcome = RuntimeRequirementRules.check(m, providers: onlyDiagnostics)
    #expect(outcome.failureReason == .unsatisfiedRuntimeRequirement)
    #expect(
      outcome.failureDetail
        == #"runtimeRequirements.dataIsolation.requiredDefaultRoles: no discovered module holds defaultModuleRole "security""#
    )

    let both = ProviderAvailability(
      hostServices: [],
      discovered: [
        provider("com.example.diag", role: .diagnostics), provider("com.example.sec", role: .security),
      ])
    #expect(RuntimeRequirementRules.check(m, providers: both) == .pass)
  }

  @Test("a required ui role is filled by a discovered app module")
  func requiredUIRole() {
    let m = consumer(capabilities: [], roles: [.ui])
    #expect(
      RuntimeRequirementRules.check(m, providers: bareHost).failureReason == .unsatisfiedRuntimeRequirement)
    let app = ProviderAvailability(
      hostServices: [], discovered: [provider("com.example.shell", role: .ui, type: .app)])
    #expect(RuntimeRequirementRules.check(m, providers: app) == .pass)
  }

  @Test("a ui module claiming shared_database provides nothing, and its consumer is blocked")
  func aProviderCountsOnlyWhenItsRoleAgrees() {
    // Upstream counts a provider only when its role is valid for its module type; the claimant
    // itself is blocked by its own step 6, and must not let a consumer through meanwhile.
    let claimant = ManifestModel.make(
      "com.example.uidb", type: .ui, capabilities: [.sharedDatabase], role: .sharedDatabase)
    let consumer = consumer(capabilities: [], mode: .frameworkMediatedShared)
    let available = ProviderAvailability(hostServices: [], discovered: [claimant])
    #expect(available.roleProviders.isEmpty)
    let outcome = RuntimeRequirementRules.check(consumer, providers: available)
    #expect(outcome.failureReason == .unsatisfiedRuntimeRequirement)
    #expect(outcome.failureDetail.contains("framework_mediated_shared needs a shared_database provider"))
    #expect(
      RuntimeRequirementRules.check(claimant, providers: available).failureReason
        == .unsatisfiedRuntimeRequirement)
    // Nor does a service holding the role without requesting its capability.
    let noCapability = ManifestModel.make("com.example.db", type: .service, role: .sharedDatabase)
    #expect(ProviderAvailability(hostServices: [], discovered: [noCapability]).roleProviders.isEmpty)
    // A proper provider does, and the consumer's trace names it.
    let proper = ProviderAvailability(
      hostServices: [], discovered: [claimant, provider("com.example.db", role: .sharedDatabase)])
    #expect(RuntimeRequirementRules.check(consumer, providers: proper) == .pass)
    #expect(
      RuntimeRequirementRules.passDetail(consumer, providers: proper).contains(
        "roles [shared_database→com.example.db]"))
  }

  @Test("the trace names the module that satisfied each required role")
  func theTraceNamesEachRolesProvider() {
    let m = consumer(capabilities: [], roles: [.security, .diagnostics])
    let both = ProviderAvailability(
      hostServices: [],
      discovered: [
        provider("com.example.diag", role: .diagnostics), provider("com.example.sec", role: .security),
      ])
    #expect(
      RuntimeRequirementRules.passDetail(m, providers: both).hasSuffix(
        "roles [diagnostics→com.example.diag, security→com.example.sec]"))
  }

  @Test("ProviderAvailability collects every discovered role holder in order")
  func availabilityFromDiscovered() {
    let available = ProviderAvailability(
      discovered: [
        provider("com.example.db1", role: .sharedDatabase), ManifestModel.make("com.example.plain"),
        provider("com.example.db2", role: .sharedDatabase),
      ])
    #expect(available.roleProviders == [.sharedDatabase: ["com.example.db1", "com.example.db2"]])
    #expect(available.hostServices == ProviderAvailability.defaultHostServices)
    #expect(available.provider(for: .sharedDatabase) == "com.example.db1")
    #expect(available.provider(for: .storage) == "host service")
    #expect(available.provider(for: .networking) == nil)
  }
}

@Suite("DefaultRoleRules")
struct DefaultRoleRulesTests {
  @Test("a ui role on a service module fails")
  func uiRoleOnService() {
    let m = ManifestModel.make(type: .service, role: .ui)
    let outcome = RuntimeRequirementRules.check(m, providers: .init())
    #expect(outcome.failureReason == .unsatisfiedRuntimeRequirement)
    #expect(
      outcome.failureDetail
        == #"defaultModuleRole: "ui" is a role for app or ui modules and this is a service module: remove defaultModuleRole, or use one of "shared_database", "authentication", "diagnostics", "api", "security""#
    )
  }

  @Test("a ui role on an app or ui module passes without any capability", arguments: [ModuleType.app, .ui])
  func uiRoleOnVisual(_ type: ModuleType) {
    let m = ManifestModel.make(type: type, capabilities: [], role: .ui)
    #expect(DefaultRoleRules.problems(m).isEmpty)
    #expect(RuntimeRequirementRules.check(m, providers: .init()) == .pass)
  }

  @Test("a shared_database role on a service without the capability fails")
  func serviceRoleWithoutCapability() {
    let m = ManifestModel.make(type: .service, capabilities: [.storage], role: .sharedDatabase)
    let outcome = RuntimeRequirementRules.check(m, providers: .init())
    #expect(outcome.failureReason == .unsatisfiedRuntimeRequirement)
    #expect(
      outcome.failureDetail
        == #"defaultModuleRole: "shared_database" needs capability shared_database in capabilitiesRequested: add "shared_database" there, or remove defaultModuleRole"#
    )
  }

  @Test(
    "each service role needs a service module requesting the capability of the same name",
    arguments: [DefaultModuleRole.sharedDatabase, .authentication, .diagnostics, .api, .security])
  func serviceRoles(_ role: DefaultModuleRole) throws {
    let cap = try #require(Capability(rawValue: role.rawValue))
    #expect(
      DefaultRoleRules.problems(ManifestModel.make(type: .service, capabilities: [cap], role: role)).isEmpty)
    #expect(
      DefaultRoleRules.problems(ManifestModel.make(type: .service, capabilities: [], role: role)).count == 1)
    let onApp = DefaultRoleRules.problems(ManifestModel.make(type: .app, capabilities: [cap], role: role))
    #expect(onApp.count == 1)
    #expect(
      onApp.first
        == #"defaultModuleRole: "\#(role.rawValue)" is a role for service modules and this is an app module: remove defaultModuleRole, or use "ui""#
    )
  }

  @Test("a service role on a ui module without the capability reports both problems")
  func bothProblems() {
    #expect(
      DefaultRoleRules.problems(ManifestModel.make(type: .ui, capabilities: [], role: .security)).count == 2)
  }

  @Test("no role, no problem")
  func noRole() {
    #expect(DefaultRoleRules.problems(ManifestModel.make(type: .service)).isEmpty)
  }
}
