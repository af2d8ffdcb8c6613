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
  let apply: @Sendable (inout ForsettiHost.Configuration, String) throws(SettingProblem) -> Void

  init(
    key: String, fields: [String], repeatable: Bool = false, isFlag: Bool = false,
    apply: @escaping @Sendable (inout ForsettiHost.Configuration, String) throws(SettingProblem) -> Void
  ) {
    self.key = key
    self.fields = fields
    self.repeatable = repeatable
    self.isFlag = isFlag
    self.apply = apply
  }

  /// Every key, in the order `run --help` lists them.
  public static let all: [SettingKey] = [
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
    number("log-file-size", "logLimits.maxFileBytes") {
      $0.logLimits.maxFileBytes = Int(min($1, 1e12) * Double(ConfigurationRules.mebibyte))
    },
    number("log-files", "logLimits.keptFiles") { $0.logLimits.keptFiles = Int($1) },
    mebibytes("storage-quota", "quotas.secureStorageBytes") {
      $0.quotas.secureStorageBytes = Int(clamping: $1)
    },
    mebibytes("export-quota", "quotas.exportBytes") { $0.quotas.exportBytes = Int(clamping: $1) },
    SettingKey(key: "export-dir", fields: ["exportDirectory"]) { c, text throws(SettingProblem) in
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
    seconds("grace", "development.grace") { c, v in
      c.development = DevelopmentSettings(grace: v, debounce: c.development?.debounce ?? 0.1)
    },
    // In milliseconds, as `dev --debounce` has always taken it.
    number("debounce", "development.debounce") { c, v in
      c.development = DevelopmentSettings(grace: c.development?.grace ?? 0.5, debounce: v / 1000)
    },
  ]

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
    _ key: String, _ field: String,
    _ set: @escaping @Sendable (inout ForsettiHost.Configuration, Double) -> Void
  ) -> SettingKey {
    SettingKey(key: key, fields: [field]) { c, text throws(SettingProblem) in
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
