import ForsettiBinary
import ForsettiCore
import FoundationEssentials
import Glibc

/// The gate stack with every input the host has, read fresh: manifests, binaries, approvals,
/// overrides, licences, trusted keys, the entitlements file. `check`, `list`, `explain`, `run`
/// and `dev` all judge through it, and so does the running host each time something changes.
package struct Judge: Sendable {
  package let configuration: HostConfiguration

  package init(_ configuration: HostConfiguration) { self.configuration = configuration }

  /// The gate stack's verdict on everything, and what it was judged with.
  package struct Verdicts: Sendable {
    package var report: DiscoveryReport
    package var context: GateContext
    /// The plugin directories' binaries; nil when none were given.
    package var index: BinaryIndex?
    package var judgements: [ModuleJudgement]
    /// Files in the plugin directories that could not be inspected.
    package var binaryFailures: [BinaryError]
    /// The next instant at which a verdict can change by itself (a licence expires, an override
    /// window opens or closes), in seconds since 1970.
    package var nextEdge: Instant?
  }

  /// Discovers, then judges every manifest. Without plugin directories the binary step is
  /// skipped; `laterSteps` records the load steps as skipped with that reason (nil leaves them
  /// to the loader). With `applyReductions`, approvals of modules that now request less are
  /// shrunk first (the Apsule rule), so a capability dropped and re-added is asked for again.
  /// `discovered` sees the manifests then, before approvals are read: a prompt may write some.
  package func judge(
    laterSteps: String?, applyReductions: Bool = false, discovered: ([ModuleManifest]) -> Void = { _ in }
  ) throws(JudgeError) -> Verdicts {
    let report = try discover()
    if applyReductions && !configuration.approveAll {
      let store = ApprovalStore(stateDirectory: configuration.stateDirectory)
      do { _ = try store.shrink(to: report.manifests) } catch {
        throw .file(setting: "state", path: store.path, reason: error.description)
      }
    }
    discovered(report.manifests)
    let (context, nextEdge) = try gateContext(discovered: report.manifests)
    let index =
      configuration.pluginDirectories.isEmpty
      ? nil : BinaryIndex.build(directories: configuration.pluginDirectories)
    let step = index.map { inspect($0) }
    let judgements = GateStack.judge(
      report, context: context,
      inspect: { m in step?(m) ?? .skipped("no --plugins directory given; binary not inspected") },
      laterSteps: laterSteps)
    return Verdicts(
      report: report, context: context, index: index, judgements: judgements,
      binaryFailures: index?.failures ?? [], nextEdge: nextEdge)
  }

  /// The manifest directory's files, each a manifest or the reason it is not.
  package func discover() throws(JudgeError) -> DiscoveryReport {
    do {
      return try ManifestDiscovery.discover(
        from: DirectoryManifestSource(root: configuration.manifestsDirectory),
        mode: configuration.discoveryMode)
    } catch {
      throw .manifests(error)
    }
  }

  /// The gate context for `discovered`, from the files as they are now, and the next instant
  /// at which it changes by itself.
  package func gateContext(discovered: [ModuleManifest]) throws(JudgeError) -> (GateContext, Instant?) {
    var staticProducts = Set<String>()
    if let path = configuration.entitlementsFile {
      let value = try Self.readJSON(path, setting: "entitlements", missingOK: false) ?? .null
      switch StaticEntitlementProvider.decode(value) {
      case .success(let p): staticProducts = p.unlockedProducts
      case .failure(let e): throw .file(setting: "entitlements", path: path, reason: e.description)
      }
    }
    let approvals =
      configuration.approveAll ? ApprovalLedger(approveAll: true) : try storedApprovals()
    let now = GateContext.wallClock()
    let licences = LicenceEntitlementProvider.load(
      stateDirectory: configuration.stateDirectory, staticProducts: staticProducts, now: now)
    let entitlements: any EntitlementProvider =
      if configuration.allowAllEntitlements {
        AllowAllEntitlementProvider()
      } else if let custom = configuration.entitlementSource {
        EitherEntitlementProvider(first: licences, second: custom)
      } else {
        licences
      }
    let store = OverrideStore(stateDirectory: configuration.stateDirectory)
    let overrides: OverrideStore.Content
    do { overrides = try store.load() } catch {
      throw .file(setting: "state", path: store.path, reason: error.description)
    }
    let context = GateContext(
      compatibility: CompatibilityChecker(hostVersion: configuration.hostVersion, policy: try policy()),
      approvals: approvals, entitlements: entitlements,
      providers: ProviderAvailability(discovered: discovered),
      overrides: store.channels(overrides, inMemory: configuration.inMemoryOverrides.snapshot),
      activeProducts: licences.activeProducts, now: now)
    let edges = overrides.edges
    let next = ([licences.nextExpiry].compactMap { $0 } + edges).filter { $0 > now }.min()
    return (context, next)
  }

  /// The capability policy: the policy file as it is now, or the configured policy.
  package func policy() throws(JudgeError) -> any CapabilityPolicy {
    guard let path = configuration.policyFile else { return configuration.policy }
    do throws(JudgeError) {
      let read = try Self.readPolicy(path)
      configuration.policyMemory?.remember(read)
      return read
    } catch {
      if let kept = configuration.policyMemory?.fallBack(after: error) { return kept }
      throw error
    }
  }

  /// A `--policy FILE`, decoded; its errors name the file, the rule and the field.
  package static func readPolicy(_ path: String) throws(JudgeError) -> RuleCapabilityPolicy {
    let value = try readJSON(path, setting: "policy", missingOK: false) ?? .null
    switch PolicyFile.decode(value, path: path) {
    case .success(let file): return RuleCapabilityPolicy(file)
    case .failure(let e): throw .file(setting: "policy", path: path, reason: e.description)
    }
  }

  /// Keys trusted for module signatures: `STATE/trusted-keys/modules/*.pub`.
  package var moduleKeys: [String: [UInt8]] {
    TrustedKeys.keys(.modules, stateDirectory: configuration.stateDirectory)
  }

  /// What the signature check makes of a finding, as configured.
  package var signaturePolicy: SignaturePolicy {
    SignaturePolicy(
      required: configuration.requireSignatures,
      licenceKeyIDs: Set(TrustedKeys.keys(.licences, stateDirectory: configuration.stateDirectory).keys),
      modulesDirectory: TrustedKeys.directory(.modules, stateDirectory: configuration.stateDirectory))
  }

  /// What step 2 checks signatures with: the trusted module keys and the signature policy.
  package struct SignatureTrust: Sendable {
    package var keys: [String: [UInt8]]
    package var policy: SignaturePolicy
  }

  /// The signature trust as the state directory holds it now.
  package var signatureTrust: SignatureTrust { SignatureTrust(keys: moduleKeys, policy: signaturePolicy) }

  /// Step 2 as configured: ELF inspection, then the module's signature (`SignaturePolicy`), the
  /// keys read once, not once per module. `trust` is what an earlier round read, when the files
  /// it comes from are known not to have changed since (nil: read now).
  package func inspect(_ index: BinaryIndex, trust: SignatureTrust? = nil)
    -> @Sendable (ModuleManifest) -> BinaryInspectionStep
  {
    let trust = trust ?? signatureTrust
    let keys = trust.keys
    let policy = trust.policy
    // Nothing to verify and nothing required: no module can be refused for its signature, so
    // the signature is read only if the pass line is.
    let lazy = keys.isEmpty && !policy.required
    return { m in
      // One lookup of the binary for both halves of the step.
      let (step, binary) = index.inspection(for: m)
      guard case .outcome(.pass, let found) = step, let path = binary else { return step }
      if lazy {
        return .outcome(
          .pass,
          passNote: .deferred {
            "\(found.text); \(policy.judge(SignatureFinding.read(binary: path, trusted: [:]), binary: path).note)"
          })
      }
      let (outcome, note) = policy.judge(SignatureFinding.read(binary: path, trusted: keys), binary: path)
      return .outcome(outcome, passNote: .deferred { "\(found.text); \(note)" })
    }
  }

  /// The approvals the user actually gave (`approvals.json`), whatever `approveAll` says.
  package func storedApprovals() throws(JudgeError) -> ApprovalLedger {
    let store = ApprovalStore(stateDirectory: configuration.stateDirectory)
    do { return try store.load() } catch {
      throw .file(setting: "state", path: store.path, reason: error.description)
    }
  }

  /// A JSON file's content; nil when it does not exist and `missingOK`.
  package static func readJSON(_ path: String, setting: String, missingOK: Bool) throws(JudgeError)
    -> JSONValue?
  {
    guard FileManager.default.fileExists(atPath: path) else {
      if missingOK { return nil }
      throw .file(setting: setting, path: path, reason: "no such file")
    }
    guard let data = FileManager.default.contents(atPath: path) else {
      throw .file(setting: setting, path: path, reason: "cannot be read")
    }
    do { return try JSONParser.parse([UInt8](data)) } catch {
      throw .file(setting: setting, path: path, reason: "invalid JSON at \(error)")
    }
  }
}

/// Unlocked when either provider unlocks: the host's licences, or an application's own source.
struct EitherEntitlementProvider: EntitlementProvider {
  let first: any EntitlementProvider
  let second: any EntitlementProvider

  func isUnlocked(productID: String, moduleID: String) -> Bool {
    first.isUnlocked(productID: productID, moduleID: moduleID)
      || second.isUnlocked(productID: productID, moduleID: moduleID)
  }

  var name: String { "\(first.name) + \(second.name)" }
}
