import ForsettiBridge
import ForsettiCore
import ForsettiRuntime
import FoundationEssentials

/// The settings a host takes as text, one entry each: the key (host.conf's name, which is also
/// `run`'s option: `memory-limit`), the configuration's fields it writes, and how the text
/// becomes their value. The command line, `host.conf` and the C API's
/// `forsetti_embed_config_set` all set a configuration through this table; the ranges are
/// `ConfigurationRules`', checked on the values whichever way they were set.
public struct SettingKey: Sendable {
  /// host.conf's and the command line's name.
  public let key: String
  /// The fields of `ForsettiHost.Configuration` it sets, as `SettingProblem.setting` names
  /// them (a problem whose setting starts with one of these is this key's).
  public let fields: [String]
  /// Whether the key may be given more than once, each adding to the last.
  public let repeatable: Bool
  /// Whether its value is `true` or `false` (a flag on the command line).
  public let isFlag: Bool
  /// The unit the key's text is in, where the field holds another (`log-file-size` in MiB, the
  /// field in bytes): a refusal stated in the field's unit says so.
  public let textUnit: String?
  let apply: @Sendable (inout ForsettiHost.Configuration, String) throws(SettingProblem) -> Void

  init(
    key: String, fields: [String], repeatable: Bool = false, isFlag: Bool = false, textUnit: String? = nil,
    apply: @escaping @Sendable (inout ForsettiHost.Configuration, String) throws(SettingProblem) -> Void
  ) {
    self.key = key
    self.fields = fields
    self.repeatable = repeatable
    self.isFlag = isFlag
    self.textUnit = textUnit
    self.apply = apply
  }

  /// Every key: judging's, then a running host's.
  public static let all: [SettingKey] = judgingKeys + hostKeys

  /// What the gate stack judges with: where manifests, binaries and state are, the policy, the
  /// entitlements file, approvals, signatures.
  public static let judgingKeys: [SettingKey] = [
    text("manifests", "judging.manifestsDirectory") { $0.judging.manifestsDirectory = $1 },
    SettingKey(key: "plugins", fields: ["judging.pluginDirectories"], repeatable: true) {
      c, text throws(SettingProblem) in
      c.judging.pluginDirectories.append(text)
    },
    text("state", "judging.stateDirectory") { $0.judging.stateDirectory = $1 },
    flag("strict", "judging.discoveryMode") { c, on in c.judging.discoveryMode = on ? .strict : .fallback },
    SettingKey(key: "policy", fields: ["judging.policy"]) { c, text throws(SettingProblem) in
      do throws(PolicyText.Failure) {
        let (policy, file) = try PolicyText.parse(text)
        c.judging.policy = policy
        c.judging.policyFile = file
      } catch {
        throw SettingProblem(setting: "judging.policy", value: text, why: error.why)
      }
    },
    text("entitlements", "judging.entitlementsFile") { $0.judging.entitlementsFile = $1 },
    flag("approve-all", "judging.approveAll") { $0.judging.approveAll = $1 },
    SettingKey(key: "host-version", fields: ["judging.hostVersion"]) { c, text throws(SettingProblem) in
      guard let v = SemanticVersion(parsing: text) else {
        throw SettingProblem(
          setting: "judging.hostVersion", value: text, why: "expected a version X.Y.Z, e.g. 0.2.0")
      }
      c.judging.hostVersion = v
    },
    flag("require-signatures", "judging.requireSignatures") { $0.judging.requireSignatures = $1 },
    SettingKey(key: "default-policy", fields: ["judging.defaultPolicy"]) { c, text throws(SettingProblem) in
      guard let p = DefaultPolicy(rawValue: text) else {
        throw SettingProblem(setting: "judging.defaultPolicy", value: text, why: "expected allow or deny")
      }
      c.judging.defaultPolicy = p
    },
  ]

  /// A running host's settings, in the order `run --help` lists them.
  public static let hostKeys: [SettingKey] = [
    seconds("start-timeout", "isolation.startTimeout") { $0.isolation?.startTimeout = $1 },
    seconds("stop-timeout", "isolation.stopTimeout") { $0.isolation?.stopTimeout = $1 },
    mebibytes("memory-limit", "isolation.limits.memoryBytes") { $0.isolation?.limits.memoryBytes = $1 },
    mebibytes("tmpdir-size", "isolation.limits.temporaryBytes") {
      $0.isolation?.limits.temporaryBytes = $1 == 0 ? nil : $1
    },
    mebibytes("sandbox-quota", "isolation.sandboxBytes") { $0.isolation?.sandboxBytes = $1 == 0 ? nil : $1 },
    number("cpu-limit", "isolation.limits.cpuSeconds") {
      $0.isolation?.limits.cpuSeconds = UInt64(max(1, $1))
    },
    SettingKey(
      key: "cpu-weight", fields: ["isolation.cpu.defaultWeight", "isolation.cpu.weights"], repeatable: true
    ) { c, text throws(SettingProblem) in
      do throws(CPUSharesError) { try c.isolation?.cpu.setWeight(text) } catch {
        throw SettingProblem(setting: "isolation.cpu.weights", value: text, why: error.description)
      }
    },
    SettingKey(
      key: "cpu-max", fields: ["isolation.cpu.defaultMaxPercent", "isolation.cpu.maxPercents"],
      repeatable: true
    ) { c, text throws(SettingProblem) in
      do throws(CPUSharesError) { try c.isolation?.cpu.setMaxPercent(text) } catch {
        throw SettingProblem(setting: "isolation.cpu.maxPercents", value: text, why: error.description)
      }
    },
    number("max-restarts", "isolation.maxRestarts") { $0.isolation?.maxRestarts = Int($1) },
    SettingKey(key: "worker-env", fields: ["isolation.workerEnvironment"], repeatable: true) {
      c, text throws(SettingProblem) in
      do throws(WorkerEnvironment.Refusal) {
        try c.isolation?.workerEnvironment.pass(text, host: ProcessInfo.processInfo.environment)
      } catch {
        throw SettingProblem(setting: "isolation.workerEnvironment", value: text, why: error.description)
      }
    },
    flag("no-zygote", "isolation.zygote") { c, on in if on { c.isolation?.zygote = false } },
    flag("in-process", "isolation") { c, on in if on { c.isolation = nil } },
    number("log-rate", "logLimits.linesPerSecond") { $0.logLimits.linesPerSecond = Int($1) },
    number("log-burst", "logLimits.burstLines") { $0.logLimits.burstLines = Int($1) },
    number("log-file-size", "logLimits.maxFileBytes", textUnit: "MiB") {
      $0.logLimits.maxFileBytes = Int(min($1, 1e12) * Double(ConfigurationRules.mebibyte))
    },
    number("log-files", "logLimits.keptFiles") { $0.logLimits.keptFiles = Int($1) },
    mebibytes("storage-quota", "quotas.secureStorageBytes") {
      $0.quotas.secureStorageBytes = Int(clamping: $1)
    },
    mebibytes("export-quota", "quotas.exportBytes") { $0.quotas.exportBytes = Int(clamping: $1) },
    SettingKey(key: "export-dir", fields: ["exportDirectory"]) { c, text throws(SettingProblem) in
      guard !text.isEmpty else {
        throw SettingProblem(setting: "exportDirectory", value: text, why: "expected a directory")
      }
      guard text.hasPrefix("/") else {
        throw SettingProblem(setting: "exportDirectory", value: text, why: "expected an absolute path")
      }
      c.exportDirectory = text
    },
    SettingKey(key: "metrics", fields: ["metricsAddress"]) { c, text throws(SettingProblem) in
      do throws(MetricsAddress.ParseError) { c.metricsAddress = try MetricsAddress(parsing: text) } catch {
        throw SettingProblem(setting: "metricsAddress", value: text, why: error.description)
      }
    },
    SettingKey(key: "application-id", fields: ["applicationID"]) { c, text throws(SettingProblem) in
      c.applicationID = text
    },
    // Tune hot reload where it is on (`dev`, or `development` set); they never turn it on.
    seconds("grace", "development.grace") { c, v in c.development?.grace = v },
    // In milliseconds, as `dev --debounce` has always taken it.
    number("debounce", "development.debounce", textUnit: "milliseconds") { c, v in
      c.development?.debounce = v / 1000
    },
  ]

  /// `why` a value of this key was refused, saying the key's unit where the refusal is stated
  /// in its field's.
  public func explained(_ why: String) -> String {
    textUnit.map { "\(why) (\(key) is given in \($0))" } ?? why
  }

  /// The entry for `key`; nil for a key no host setting has.
  public static func named(_ key: String) -> SettingKey? { all.first { $0.key == key } }

  /// The key whose fields hold `setting` (`isolation.cpu.weights[com.a]` is `cpu-weight`'s).
  public static func owning(_ setting: String) -> SettingKey? {
    all.first { entry in
      entry.fields.contains { f in
        setting == f || setting.hasPrefix(f + ".") || setting.hasPrefix(f + "[")
      }
    }
  }

  // MARK: The kinds of text

  /// A non-negative finite number, as every numeric key takes it.
  static func parsed(_ text: String, _ field: String) throws(SettingProblem) -> Double {
    guard let v = Double(text), v >= 0, v.isFinite else {
      throw SettingProblem(setting: field, value: text, why: "expected a non-negative number, e.g. 5 or 0.5")
    }
    return v
  }

  /// A number, clamped to what an `Int` holds before it is converted (the range is the rule's to
  /// say, on the value set, not a trap's).
  static func number(
    _ key: String, _ field: String, textUnit: String? = nil,
    _ set: @escaping @Sendable (inout ForsettiHost.Configuration, Double) -> Void
  ) -> SettingKey {
    SettingKey(key: key, fields: [field], textUnit: textUnit) { c, text throws(SettingProblem) in
      set(&c, min(try parsed(text, field), 1e15))
    }
  }

  static func seconds(
    _ key: String, _ field: String,
    _ set: @escaping @Sendable (inout ForsettiHost.Configuration, Double) -> Void
  ) -> SettingKey {
    SettingKey(key: key, fields: [field]) { c, text throws(SettingProblem) in set(&c, try parsed(text, field))
    }
  }

  /// MiB as text, bytes in the field; beyond what a `UInt64` holds, its largest value (which
  /// every rule refuses).
  static func mebibytes(
    _ key: String, _ field: String,
    _ set: @escaping @Sendable (inout ForsettiHost.Configuration, UInt64) -> Void
  ) -> SettingKey {
    SettingKey(key: key, fields: [field]) { c, text throws(SettingProblem) in
      let bytes = try parsed(text, field) * Double(ConfigurationRules.mebibyte)
      set(&c, bytes >= 18_446_744_073_709_549_568 ? UInt64.max : UInt64(bytes))
    }
  }

  /// A non-empty text: a path, a file.
  static func text(
    _ key: String, _ field: String,
    _ set: @escaping @Sendable (inout ForsettiHost.Configuration, String) -> Void
  ) -> SettingKey {
    SettingKey(key: key, fields: [field]) { c, text throws(SettingProblem) in
      guard !text.isEmpty else { throw SettingProblem(setting: field, value: text, why: "expected a path") }
      set(&c, text)
    }
  }

  static func flag(
    _ key: String, _ field: String,
    _ set: @escaping @Sendable (inout ForsettiHost.Configuration, Bool) -> Void
  ) -> SettingKey {
    SettingKey(key: key, fields: [field], isFlag: true) { c, text throws(SettingProblem) in
      guard text == "true" || text == "false" else {
        throw SettingProblem(setting: field, value: text, why: "expected true or false")
      }
      set(&c, text == "true")
    }
  }
}

extension ForsettiHost.Configuration {
  /// The configuration host.conf at `path` gives (`key = value` lines, the keys `run`'s options,
  /// `SettingKey.all`): the defaults of `init(manifestsDirectory:pluginDirectories:stateDirectory:)`
  /// with `manifests`, `.build/plugins`' absence and the default state directory, then each line
  /// in order. Every line that cannot be used is said at once, by line (`file:3: invalid value …
  /// isolation.maxRestarts: expected 0 to 1000`), as is every setting out of its range.
  public init(file path: String) throws(ForsettiHostError) {
    let keys = SettingKey.all.map { ConfigKey(name: $0.key, isFlag: $0.isFlag, repeatable: $0.repeatable) }
    let file: ConfigFile
    do { file = try ConfigFile.read(path, keys: keys) } catch { throw .configurationFile(error) }
    self.init(
      manifestsDirectory: "manifests", pluginDirectories: [], stateDirectory: DefaultStateDirectory.current)
    var problems: [ConfigFileError] = []
    var lines: [String: Int] = [:]
    for entry in file.entries {
      lines[entry.key] = entry.line
      do throws(SettingProblem) { try set(entry.key, to: entry.value) } catch {
        problems.append(
          .invalidValue(
            path: path, line: entry.line, key: entry.key, value: entry.value,
            why: "\(error.setting): \(error.why)"))
      }
    }
    for problem in settingProblems {
      let key = SettingKey.owning(problem.setting)?.key ?? problem.setting
      problems.append(
        .invalidValue(
          path: path, line: lines[key] ?? 0, key: key, value: problem.value,
          why: "\(problem.setting): \(problem.why)"))
    }
    if problems.count == 1, let only = problems.first { throw .configurationFile(only) }
    if !problems.isEmpty { throw .configurationFile(.several(problems)) }
  }

  /// Sets `key` (host.conf's name: `memory-limit`, `cpu-weight`, …) from `text` as host.conf and
  /// `run` take it (MiB, seconds, `true`/`false`). A repeatable key adds to what it set before;
  /// an isolation key changes nothing while modules load in-process. The ranges are checked by
  /// `validated()`.
  public mutating func set(_ key: String, to text: String) throws(SettingProblem) {
    guard let entry = SettingKey.named(key) else {
      throw SettingProblem(setting: key, value: text, why: "no such setting")
    }
    try entry.apply(&self, text)
  }
}
