import ForsettiBinary
import ForsettiCore
import ForsettiRuntime
import FoundationEssentials
import Glibc

/// `forsetti-host lint MANIFEST [--plugin FILE.so]`: the review checklist of the reference as
/// checks with clear messages. Errors block the module; warnings are things a reviewer asks.
enum LintCommand {
  static let spec = CommandSpec(
    name: "lint",
    abstract: "Check a manifest (and its binary) against the module review checklist.",
    discussion: """
      Checks: the manifest is valid; paid modules have a stable product ID; runtimeRequirements.io
      matches the requested capabilities; default-role modules are of the right type with the
      capability; UI modules declare their contribution IDs (template 1.1); a theme mask is not
      host shell styling; and, with --plugin, that the binary exports the entry point and which
      host services it names (forsetti.storage, forsetti.telemetry) against what is requested,
      that it can load on this system (every library of its closure found, every symbol version
      it needs defined: what `check` blocks as binaryIncompatible), and with --glibc or --target
      that it loads on that older system too. A binary built with ForsettiSDK names every
      service, so for it the services check is replaced by a note (level "info").

      EXIT STATUS:
        0  no errors (warnings may be printed)
        1  at least one error
        2  usage error
      """,
    options: [
      .value("plugin", "FILE.so", "The module's binary."),
      .value(
        "glibc", "X.Y",
        "With --plugin: the oldest glibc the binary must load on; every symbol version newer than it, and every library outside the base set, is an error."
      ),
      .value(
        "target", "NAME",
        "With --plugin: a named baseline instead of --glibc (glibc, libstdc++ and the base libraries of \(BinaryBaseline.named.map(\.name).joined(separator: ", ")))."
      ),
      .flag("json", "Print JSON instead of text."),
    ],
    positionals: [PositionalSpec("MANIFEST", "The manifest file.")])

  struct Finding {
    var level: String
    var check: String
    var message: String
  }

  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    let path = p.positionals[0]
    guard let data = FileManager.default.contents(atPath: path) else {
      throw .configuration(.file(option: "manifest", path: path, reason: "cannot be read"))
    }
    var findings: [Finding] = []
    switch ManifestDecoder.decode(bytes: [UInt8](data)) {
    case .failure(let e):
      findings.append(.init(level: "error", check: "manifest", message: e.description))
    case .success(let m):
      findings += review(m)
      if let plugin = p.value("plugin") { findings += binary(m, plugin, baseline: try baseline(p)) }
    }
    if p.flag("json") {
      let items = findings.map {
        JSONValue.object(
          JSONObject([
            ("level", .string($0.level)), ("check", .string($0.check)), ("message", .string($0.message)),
          ]))
      }
      console.out(
        JSONWriter.string(
          .object(JSONObject([("file", .string(path)), ("findings", .array(items))])), pretty: true) + "\n")
    } else {
      for f in findings {
        console.out("\(f.level.padded(to: 7)) \(f.check): \(f.message)\n")
      }
      let errors = findings.filter { $0.level == "error" }.count
      let warnings = findings.filter { $0.level == "warning" }.count
      console.out(
        "\(ModuleText.visible(path)): \(errors) error\(errors == 1 ? "" : "s"), \(warnings) warning\(warnings == 1 ? "" : "s")\n"
      )
    }
    return findings.contains { $0.level == "error" } ? .blocked : .success
  }

  static func review(_ m: ModuleManifest) -> [Finding] {
    var out: [Finding] = []
    if let product = m.iapProductID, !product.contains(".") || product.contains(" ") {
      out.append(
        .init(
          level: "warning", check: "product ID",
          message:
            "\"\(product)\" does not look like a stable reverse-DNS product ID; it must not change after release"
        ))
    }
    for problem in DefaultRoleRules.problems(m) {
      out.append(.init(level: "error", check: "default role", message: problem))
    }
    var ioProblems = RuntimeRequirementRules.problems(
      m, providers: ProviderAvailability(hostServices: Set(IOKind.allCases)))
    ioProblems.removeAll { p in DefaultRoleRules.problems(m).contains(p) }
    for problem in ioProblems {
      out.append(.init(level: "error", check: "runtime requirements", message: problem))
    }
    let uiCaps: Set<Capability> = [.toolbarItems, .viewInjection, .routingOverlay, .uiThemeMask]
    let requestedUI = m.capabilitySet.intersection(uiCaps)
    if m.moduleType == .service && !requestedUI.isEmpty {
      out.append(
        .init(
          level: "error", check: "UI",
          message:
            "a service module requests UI capabilities (\(requestedUI.sorted().map(\.rawValue).joined(separator: ", "))); make it a ui or app module"
        ))
    }
    if m.usesTemplate11 && m.moduleType.isVisual && !requestedUI.isEmpty && m.runtimeRequirements?.ui == nil {
      out.append(
        .init(
          level: "error", check: "UI",
          message:
            "template 1.1 ui/app modules with UI contributions must declare their IDs under runtimeRequirements.ui"
        ))
    }
    if m.capabilitySet.contains(.uiThemeMask) {
      out.append(
        .init(
          level: "warning", check: "theme mask",
          message:
            "ui_theme_mask is validated and then stripped before publication: it is not host shell styling"))
    }
    return out
  }

  /// The baseline of `--glibc` or `--target`, nil without either.
  static func baseline(_ p: ParsedArguments) throws(CommandFailure) -> BinaryBaseline? {
    if let raw = p.value("glibc") {
      guard p.value("target") == nil else {
        throw .usage(.invalidValue(option: "glibc", value: raw, why: "give --glibc or --target, not both"))
      }
      guard let b = BinaryBaseline.glibc(raw) else {
        throw .usage(.invalidValue(option: "glibc", value: raw, why: "expected MAJOR.MINOR, e.g. 2.28"))
      }
      return b
    }
    guard let raw = p.value("target") else { return nil }
    guard let b = BinaryBaseline.named.first(where: { $0.name == raw }) else {
      let names = BinaryBaseline.named.map(\.name)
      let hint = Suggestion.closest(to: raw, among: names).map { "did you mean \($0)? " } ?? ""
      throw .usage(
        .invalidValue(option: "target", value: raw, why: "\(hint)known: \(names.joined(separator: ", "))"))
    }
    return b
  }

  static func binary(_ m: ModuleManifest, _ plugin: String, baseline: BinaryBaseline? = nil) -> [Finding] {
    var out: [Finding] = []
    var builtWithSDK = false
    switch ELFInspector.inspect(plugin) {
    case .failure(let e):
      return [.init(level: "error", check: "binary", message: e.description)]
    case .success(let facts):
      // The gate's own rule (`binaryIncompatible`), so lint and check never disagree.
      let resolution = LibraryFactsCache.shared.resolver().resolve(facts, path: plugin)
      for problem in BinaryCompatibility.problems(facts, path: plugin, resolution) {
        out.append(.init(level: "error", check: "loads here", message: problem.description))
      }
      if let baseline {
        for finding in baseline.findings(facts, path: plugin, resolution) {
          out.append(.init(level: "error", check: baseline.name, message: finding.description))
        }
      }
      if !facts.exportedFunctions.contains(m.entryPoint) {
        // The same judgement as the index's, so lint and check never disagree on a name with
        // several versions.
        let problem = facts.symbolTable.entryPointProblem(named: m.entryPoint)
        let why = problem.map { "\($0.reason); \($0.fix)" } ?? "it is not exported"
        out.append(.init(level: "error", check: "entry point", message: "\(m.entryPoint): \(why)"))
      }
      // Swift mangles the SDK's module name into the symbols it exports: "11ForsettiSDK".
      builtWithSDK = facts.dynamicSymbols.contains { $0.name.contains("11ForsettiSDK") }
      if !facts.matchesHost {
        out.append(
          .init(
            level: "error", check: "binary",
            message: "built for \(facts.elfClass.rawValue) \(facts.machine), not this host"))
      }
    }
    if builtWithSDK {
      out.append(
        .init(
          level: "info", check: "capabilities",
          message: "built with ForsettiSDK, which names every service: the binary cannot show which it uses"))
      return out
    }
    guard let bytes = FileManager.default.contents(atPath: plugin) else { return out }
    for (service, cap) in [("forsetti.storage", Capability.storage), ("forsetti.telemetry", .telemetry)] {
      let named = bytes.firstRange(of: Array((service + "\0").utf8)) != nil
      if named && !m.capabilitySet.contains(cap) {
        out.append(
          .init(
            level: "warning", check: "capabilities",
            message:
              "the binary names \(service) but the manifest does not request \(cap.rawValue): resolving it will return NULL"
          ))
      }
      if !named && m.capabilitySet.contains(cap) {
        out.append(
          .init(
            level: "warning", check: "capabilities",
            message:
              "\(cap.rawValue) is requested but the binary never names \(service): request only what the module uses"
          ))
      }
    }
    return out
  }
}
