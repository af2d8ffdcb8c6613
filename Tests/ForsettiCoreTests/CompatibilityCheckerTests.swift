import ForsettiCore
import Testing

private let host = SemanticVersion(0, 5, 0)

private func checker(
  host: SemanticVersion = host, platform: Platform = .linux,
  policy: any CapabilityPolicy = AllowAllCapabilityPolicy()
) -> CompatibilityChecker {
  CompatibilityChecker(hostVersion: host, platform: platform, policy: policy)
}

/// A product-specific policy: denies listed capabilities to listed modules, allows the rest.
private struct PerModulePolicy: CapabilityPolicy {
  var denied: [String: Set<Capability>]
  func allows(moduleID: String, capability: Capability) -> Bool {
    !(denied[moduleID]?.contains(capability) ?? false)
  }
  var name: String { "per-module" }
}

@Suite("CompatibilityChecker")
struct CompatibilityCheckerTests {
  @Test("a compatible manifest passes")
  func passes() {
    #expect(checker().check(ManifestModel.make(capabilities: [.storage, .telemetry])) == .pass)
  }

  @Test("the default checker is this host: linux, the current Forsetti version, allow-all")
  func defaults() {
    let c = CompatibilityChecker()
    #expect(c.platform == .linux)
    #expect(c.hostVersion == ForsettiVersion.current)
    #expect(c.policy.name == "allow-all")
    #expect(c.check(ManifestModel.make(min: ForsettiVersion.current)) == .pass)
  }

  // MARK: schema and template

  @Test(
    "an unknown schemaVersion is invalidSchemaVersion naming the value",
    arguments: ["2.0", "1", "1.0.0", "", "1.2"])
  func invalidSchema(_ schema: String) {
    let outcome = checker().check(ManifestModel.make(schemaVersion: schema))
    #expect(outcome.failureReason == .invalidSchemaVersion)
    #expect(outcome.failureDetail.contains("\"\(schema)\""))
    #expect(outcome.failureDetail.contains("1.0 or 1.1"))
  }

  @Test(
    "both supported schema versions pass with a matching template",
    arguments: [("1.0", "1.0"), ("1.1", "1.1")])
  func supportedSchemas(_ schema: String, _ template: String) {
    #expect(checker().check(ManifestModel.make(schemaVersion: schema, template: template)) == .pass)
  }

  @Test(
    "an unknown manifestTemplateVersion is invalidManifestTemplateVersion",
    arguments: ["1.2", "2.0", "", "1"])
  func unknownTemplate(_ template: String) {
    let outcome = checker().check(ManifestModel.make(template: template))
    #expect(outcome.failureReason == .invalidManifestTemplateVersion)
    #expect(outcome.failureDetail.contains("\"\(template)\""))
  }

  @Test("schema 1.1 without a template means template 1.0, which schema 1.1 does not allow")
  func schema11WithoutTemplate() {
    let outcome = checker().check(ManifestModel.make(schemaVersion: "1.1"))
    #expect(outcome.failureReason == .invalidManifestTemplateVersion)
    #expect(outcome.failureDetail.contains("missing"))
  }

  @Test("schema 1.1 with template 1.0 is invalidManifestTemplateVersion")
  func schema11WithTemplate10() {
    let outcome = checker().check(ManifestModel.make(schemaVersion: "1.1", template: "1.0"))
    #expect(outcome.failureReason == .invalidManifestTemplateVersion)
    #expect(outcome.failureDetail.contains("\"1.0\""))
  }

  @Test("schema 1.0 with template 1.1 is allowed")
  func schema10WithTemplate11() {
    #expect(checker().check(ManifestModel.make(schemaVersion: "1.0", template: "1.1")) == .pass)
  }

  // MARK: platform

  @Test("a module for iOS and macOS only is unsupportedPlatform, with a hint to add linux")
  func onlyApplePlatforms() {
    let outcome = checker().check(ManifestModel.make(platforms: [.iOS, .macOS]))
    #expect(outcome.failureReason == .unsupportedPlatform)
    #expect(outcome.failureDetail.contains("[iOS, macOS]"))
    #expect(outcome.failureDetail.contains(#"add "linux""#))
  }

  @Test("linux anywhere in the list passes")
  func linuxListed() {
    #expect(checker().check(ManifestModel.make(platforms: [.iOS, .macOS, .linux])) == .pass)
  }

  @Test("the checker judges against its own platform")
  func otherHostPlatform() {
    #expect(
      checker(platform: .macOS).check(ManifestModel.make(platforms: [.linux])).failureReason
        == .unsupportedPlatform)
    #expect(checker(platform: .macOS).check(ManifestModel.make(platforms: [.macOS])) == .pass)
  }

  // MARK: Forsetti version range

  @Test("a host below minForsettiVersion is unsupportedForsettiVersion naming both versions")
  func belowMin() {
    let outcome = checker().check(ManifestModel.make(min: .init(0, 6, 0)))
    #expect(outcome.failureReason == .unsupportedForsettiVersion)
    #expect(outcome.failureDetail.contains("0.5.0"))
    #expect(outcome.failureDetail.contains("0.6.0"))
    #expect(outcome.failureDetail.contains("minForsettiVersion"))
  }

  @Test("a host above maxForsettiVersion is unsupportedForsettiVersion naming both versions")
  func aboveMax() {
    let outcome = checker().check(ManifestModel.make(min: .init(0, 1, 0), max: .init(0, 4, 9)))
    #expect(outcome.failureReason == .unsupportedForsettiVersion)
    #expect(outcome.failureDetail.contains("0.4.9"))
    #expect(outcome.failureDetail.contains("maxForsettiVersion"))
  }

  @Test("a maximum equal to the host passes")
  func maxEqualHost() {
    #expect(checker().check(ManifestModel.make(min: .init(0, 1, 0), max: host)) == .pass)
  }

  @Test("a minimum equal to the host passes")
  func minEqualHost() {
    #expect(checker().check(ManifestModel.make(min: host)) == .pass)
  }

  @Test("min and max both equal to the host pass")
  func exactRange() {
    #expect(checker().check(ManifestModel.make(min: host, max: host)) == .pass)
  }

  @Test("a prerelease host is below the release it precedes")
  func prereleaseHostBelowReleaseMin() {
    let beta = SemanticVersion(1, 0, 0, prerelease: "beta.1")
    let outcome = checker(host: beta).check(ManifestModel.make(min: .init(1, 0, 0)))
    #expect(outcome.failureReason == .unsupportedForsettiVersion)
    #expect(outcome.failureDetail.contains("1.0.0-beta.1"))
    #expect(checker(host: beta).check(ManifestModel.make(min: .init(1, 0, 0, prerelease: "alpha"))) == .pass)
    #expect(checker(host: beta).check(ManifestModel.make(min: .init(0, 9, 0))) == .pass)
  }

  @Test("a release host is above a prerelease maximum")
  func releaseHostAbovePrereleaseMax() {
    let outcome = checker(host: .init(1, 0, 0)).check(
      ManifestModel.make(min: .init(0, 1, 0), max: .init(1, 0, 0, prerelease: "rc.1")))
    #expect(outcome.failureReason == .unsupportedForsettiVersion)
  }

  // MARK: capability policy

  @Test("a fixed policy denies what it does not list, naming only the denied capabilities")
  func fixedPolicyDenies() {
    let c = checker(policy: FixedCapabilityPolicy([.storage]))
    let outcome = c.check(ManifestModel.make(capabilities: [.storage, .networking, .telemetry]))
    #expect(outcome.failureReason == .capabilityDenied)
    #expect(outcome.failureDetail == "policy fixed: storage denies networking, telemetry")
  }

  @Test("a fixed policy allows what it lists")
  func fixedPolicyAllows() {
    let c = checker(policy: FixedCapabilityPolicy([.storage, .telemetry]))
    #expect(c.check(ManifestModel.make(capabilities: [.telemetry, .storage])) == .pass)
  }

  @Test("an empty capability list passes under fixed(none)")
  func emptyUnderFixedNone() {
    let c = checker(policy: FixedCapabilityPolicy([]))
    #expect(c.policy.name == "fixed (none)")
    #expect(c.check(ManifestModel.make(capabilities: [])) == .pass)
    #expect(c.check(ManifestModel.make(capabilities: [.storage])).failureReason == .capabilityDenied)
  }

  @Test("allow-all allows every capability")
  func allowAll() {
    #expect(checker().check(ManifestModel.make(capabilities: Capability.allCases)) == .pass)
  }

  @Test("the theme mask capability is not denied by a blanket rule")
  func themeMaskNotBlanketDenied() {
    #expect(checker().check(ManifestModel.make(capabilities: [.uiThemeMask])) == .pass)
  }

  @Test("a custom policy can deny per module ID")
  func customPolicy() {
    let c = checker(policy: PerModulePolicy(denied: ["com.example.tracker": [.telemetry]]))
    let tracker = c.check(ManifestModel.make("com.example.tracker", capabilities: [.storage, .telemetry]))
    #expect(tracker.failureReason == .capabilityDenied)
    #expect(tracker.failureDetail == "policy per-module denies telemetry")
    #expect(c.check(ManifestModel.make("com.example.notes", capabilities: [.storage, .telemetry])) == .pass)
    #expect(c.check(ManifestModel.make("com.example.tracker", capabilities: [.storage])) == .pass)
  }

  @Test("fixed policy names list capabilities sorted")
  func fixedPolicyName() {
    #expect(FixedCapabilityPolicy([.telemetry, .api, .storage]).name == "fixed: api, storage, telemetry")
  }

  // MARK: order

  @Test("checks run in contract order and the first failure wins")
  func order() {
    let c = checker(policy: FixedCapabilityPolicy([]))
    var m = ManifestModel.make(
      schemaVersion: "9.0", template: "7.0", platforms: [.iOS], min: .init(9, 0, 0),
      capabilities: [.networking])
    #expect(c.check(m).failureReason == .invalidSchemaVersion)
    m.schemaVersion = "1.0"
    #expect(c.check(m).failureReason == .invalidManifestTemplateVersion)
    m.manifestTemplateVersion = nil
    #expect(c.check(m).failureReason == .unsupportedPlatform)
    m.supportedPlatforms = [.linux]
    #expect(c.check(m).failureReason == .unsupportedForsettiVersion)
    m.minForsettiVersion = .init(0, 1, 0)
    #expect(c.check(m).failureReason == .capabilityDenied)
    m.capabilitiesRequested = []
    #expect(c.check(m) == .pass)
  }

  @Test("schema 1.1 without template 1.1 is reported before the platform")
  func templateRuleBeforePlatform() {
    #expect(
      checker().check(ManifestModel.make(schemaVersion: "1.1", platforms: [.macOS])).failureReason
        == .invalidManifestTemplateVersion)
  }

  @Test("the pass detail summarises what was checked")
  func passDetail() {
    let c = checker(policy: FixedCapabilityPolicy([.storage]))
    let detail = c.passDetail(ManifestModel.make(min: .init(0, 1, 0), max: .init(1, 0, 0)))
    #expect(detail == "schema 1.0, template 1.0, linux, host 0.5.0 in 0.1.0…1.0.0, policy fixed: storage")
  }
}
