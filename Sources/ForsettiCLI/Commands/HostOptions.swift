import ForsettiBinary
import ForsettiCore
import ForsettiHost
import ForsettiRuntime
import FoundationEssentials
import Glibc

/// The options every judging verb shares (`check`, and later `run`, `list`, `explain`), parsed
/// and validated once.
struct HostOptions {
  /// What the runtime judges with (one configuration type for every verb and the facade).
  var judging: HostConfiguration
  var json: Bool

  static let specs: [OptionSpec] = [
    .value("manifests", "DIR", "Directory of module manifests, scanned recursively.", default: "manifests"),
    .value(
      "plugins", "DIR", "Directory of module binaries (.so); without it binary steps are skipped.",
      repeatable: true),
    .flag("strict", "Stop at the first file that is not a valid, unique manifest."),
    .value(
      "policy", "POLICY",
      "Capability policy: allow-all, fixed:CAP,CAP,… to allow only those, or a policy file of allow/deny rules (operator guide).",
      default: "allow-all"),
    .value("entitlements", "FILE", "Unlocked products, as {\"unlockedProducts\":[\"…\"]}; none without it."),
    .flag("approve-all", "Treat every requested capability as approved (development and CI)."),
    .value(
      "host-version", "X.Y.Z", "Judge as if the host were this version.",
      default: ForsettiVersion.current.description),
    .state("State directory (approvals.json is read from it)."),
    .flag(
      "require-signatures",
      "Refuse a module unless signed by a key in STATE/trusted-keys/modules/ (forsetti-host trust KEY --for modules)."
    ),
    .flag("json", "Print JSON instead of text."),
  ]

  static func parse(_ p: ParsedArguments) throws(CommandFailure) -> HostOptions {
    var policy: any CapabilityPolicy = AllowAllCapabilityPolicy()
    var policyFile: String?
    if let raw = p.value("policy") {
      policy = try parsePolicy(raw)
      if policy is RuleCapabilityPolicy { policyFile = raw }
    }
    var hostVersion = ForsettiVersion.current
    if let raw = p.value("host-version") {
      // Through the facade's table, which states what a version is once.
      var scratch = ForsettiHost.Configuration(
        manifestsDirectory: "m", pluginDirectories: [], stateDirectory: "")
      do throws(SettingProblem) { try scratch.set("host-version", to: raw) } catch {
        throw .usage(.invalidValue(option: "host-version", value: raw, why: error.why))
      }
      hostVersion = scratch.judging.hostVersion
    }
    for dir in p.all("plugins") {
      var isDir = false
      guard FileManager.default.fileExists(atPath: dir, isDirectory: &isDir), isDir else {
        throw .configuration(.directory(option: "plugins", path: dir, reason: "no such directory"))
      }
    }
    let state = p.stateDirectory
    if p.flag("require-signatures") { try requireModuleKeys(stateDirectory: state) }
    return HostOptions(
      judging: HostConfiguration(
        manifestsDirectory: p.value("manifests") ?? "manifests", pluginDirectories: p.all("plugins"),
        discoveryMode: p.flag("strict") ? .strict : .fallback, policy: policy,
        entitlementsFile: p.value("entitlements"), approveAll: p.flag("approve-all"),
        hostVersion: hostVersion,
        stateDirectory: state, requireSignatures: p.flag("require-signatures"), policyFile: policyFile),
      json: p.flag("json"))
  }

  /// Requiring signatures with no key to check them against would refuse every module: a
  /// setting that cannot be what the operator meant, so it stops the command.
  static func requireModuleKeys(stateDirectory: String) throws(CommandFailure) {
    guard TrustedKeys.keys(.modules, stateDirectory: stateDirectory).isEmpty else { return }
    let dir = TrustedKeys.directory(.modules, stateDirectory: stateDirectory)
    throw .configuration(
      .directory(
        option: "require-signatures", path: dir,
        reason:
          "no key here is trusted for module signatures, so every module would be refused; trust the vendor's key with `forsetti-host trust VENDOR.pub --for modules --state \(stateDirectory)`, or leave out --require-signatures"
      ))
  }

  /// `--policy`, as `PolicyText` reads it; a bad one stops the command before anything is judged.
  static func parsePolicy(_ raw: String) throws(CommandFailure) -> any CapabilityPolicy {
    do { return try PolicyText.parse(raw).policy } catch {
      switch error {
      case .file(let e): throw failure(e)
      case .unknownCapability: throw .usage(.invalidValue(option: "policy", value: raw, why: error.why))
      }
    }
  }

  /// The runtime's judge (the gate stack with every trust input) for these options.
  var judge: Judge { Judge(judging) }

  /// Discovers the manifest directory.
  func discover() throws(CommandFailure) -> DiscoveryReport {
    do { return try judge.discover() } catch { throw Self.failure(error) }
  }

  /// The gate context for `discovered`: reads the entitlements file and the approval store.
  func gateContext(discovered: [ModuleManifest]) throws(CommandFailure) -> GateContext {
    do { return try judge.gateContext(discovered: discovered).0 } catch { throw Self.failure(error) }
  }

  /// Discovers, then judges every manifest up to the runtime-requirements step (or through the
  /// binary step too when plugin directories are given). `laterSteps` says why the load steps
  /// are not evaluated.
  func judge(laterSteps: String) throws(CommandFailure) -> (DiscoveryReport, [ModuleJudgement]) {
    let (report, judgements, _) = try judgeWithBinaries(laterSteps: laterSteps)
    return (report, judgements)
  }

  /// `judge`, and every file in the plugin directories that could not be inspected (named by
  /// no manifest, such a file would otherwise go unmentioned).
  func judgeWithBinaries(laterSteps: String) throws(CommandFailure) -> (
    DiscoveryReport, [ModuleJudgement], [BinaryError]
  ) {
    do {
      let v = try judge.judge(laterSteps: laterSteps)
      return (v.report, v.judgements, v.binaryFailures)
    } catch { throw Self.failure(error) }
  }

  /// The command line's form of a judging failure (exit status 2).
  static func failure(_ e: JudgeError) -> CommandFailure {
    switch e {
    case .manifests(let m): .configuration(.manifests(m))
    case .file(let setting, let path, let reason):
      .configuration(.file(option: setting, path: path, reason: reason))
    }
  }

  /// A JSON file's content; nil when it does not exist and `missingOK`.
  static func readJSON(_ path: String, option: String, missingOK: Bool) throws(CommandFailure) -> JSONValue? {
    do { return try Judge.readJSON(path, setting: option, missingOK: missingOK) } catch {
      throw failure(error)
    }
  }
}
