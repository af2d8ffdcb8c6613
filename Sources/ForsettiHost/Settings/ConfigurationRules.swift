import ForsettiBridge
import ForsettiCore
import ForsettiRuntime

/// The ranges of every setting a host takes, stated once: the facade checks them before a host
/// is made (`validated()`), the command line and the C API reach them through the same checks,
/// and each refusal names the configuration's field.
enum ConfigurationRules {
  static let mebibyte: UInt64 = 1 << 20
  static let tebibyte: UInt64 = 1 << 40
  /// Seconds beyond this are a mistake, not a setting (and a `Duration` of 1e300 s would trap).
  static let longestSeconds = 1e9

  /// Every problem of `c`, in the order of its fields; empty when the host may be made.
  static func problems(_ c: ForsettiHost.Configuration) -> [SettingProblem] {
    var found: [SettingProblem] = []
    func refuse(_ setting: String, _ value: CustomStringConvertible, _ why: String) {
      found.append(SettingProblem(setting: setting, value: value.description, why: why))
    }
    func seconds(_ setting: String, _ v: Double) {
      if !(v.isFinite && v >= 0 && v <= longestSeconds) {
        refuse(setting, v, "expected a number of seconds from 0 to \(Int(longestSeconds))")
      }
    }
    func bytes(_ setting: String, _ v: UInt64?, atMost limit: UInt64, _ size: String) {
      if let v, v > limit { refuse(setting, v, "at most \(limit / mebibyte) MiB (\(size))") }
    }
    func count(_ setting: String, _ v: Int, _ range: ClosedRange<Int>) {
      if !range.contains(v) { refuse(setting, v, "expected \(range.lowerBound) to \(range.upperBound)") }
    }
    func path(_ setting: String, _ v: String) {
      if v.isEmpty { refuse(setting, v, "expected a path") }
      if v.contains("\0") { refuse(setting, v, "a path holds no NUL byte") }
    }

    path("judging.manifestsDirectory", c.judging.manifestsDirectory)
    for d in c.judging.pluginDirectories { path("judging.pluginDirectories", d) }
    if !c.judging.stateDirectory.isEmpty { path("judging.stateDirectory", c.judging.stateDirectory) }

    if let i = c.isolation {
      path("isolation.workerExecutable", i.workerExecutable)
      seconds("isolation.startTimeout", i.startTimeout)
      seconds("isolation.stopTimeout", i.stopTimeout)
      seconds("isolation.backoffBase", i.backoffBase)
      count("isolation.maxRestarts", i.maxRestarts, 0...1000)
      bytes("isolation.limits.memoryBytes", i.limits.memoryBytes, atMost: 16 * tebibyte, "16 TiB")
      bytes("isolation.limits.temporaryBytes", i.limits.temporaryBytes, atMost: tebibyte, "1 TiB")
      bytes("isolation.sandboxBytes", i.sandboxBytes, atMost: 16 * tebibyte, "16 TiB")
      if let cpu = i.limits.cpuSeconds, !(1...UInt64(longestSeconds)).contains(cpu) {
        refuse("isolation.limits.cpuSeconds", cpu, "expected at most \(Int(longestSeconds)) seconds")
      }
      for (module, w) in [("", i.cpu.defaultWeight)] + i.cpu.weights.sorted(by: { $0.key < $1.key })
      where !CPUShares.weightRange.contains(w) {
        refuse(
          module.isEmpty ? "isolation.cpu.defaultWeight" : "isolation.cpu.weights[\(module)]", w,
          "expected \(CPUShares.weightRange.lowerBound) to \(CPUShares.weightRange.upperBound)")
      }
      let ceilings = [("", i.cpu.defaultMaxPercent)] + i.cpu.maxPercents.sorted(by: { $0.key < $1.key })
      for (module, p) in ceilings {
        if let p, !CPUShares.maxPercentRange.contains(p) {
          refuse(
            module.isEmpty ? "isolation.cpu.defaultMaxPercent" : "isolation.cpu.maxPercents[\(module)]", p,
            "expected \(CPUShares.maxPercentRange.lowerBound) to \(CPUShares.maxPercentRange.upperBound) percent"
          )
        }
      }
    }

    for (setting, value, allowed, unit) in c.logLimits.outOfRange {
      refuse(
        "logLimits.\(setting)", value,
        "expected \(allowed.lowerBound) to \(allowed.upperBound) \(unit), not \(value)")
    }
    for (setting, v, limit, size) in [
      ("quotas.secureStorageBytes", c.quotas.secureStorageBytes, tebibyte, "1 TiB"),
      ("quotas.exportBytes", c.quotas.exportBytes, 16 * tebibyte, "16 TiB"),
    ] {
      if v < 0 { refuse(setting, v, "expected a non-negative number") }
      bytes(setting, UInt64(clamping: v), atMost: limit, size)
    }
    if let e = c.exportDirectory {
      path("exportDirectory", e)
      if !e.isEmpty && !e.hasPrefix("/") { refuse("exportDirectory", e, "expected an absolute path") }
    }
    if let d = c.development {
      seconds("development.grace", d.grace)
      seconds("development.debounce", d.debounce)
    }
    count("servingThreads.base", c.servingThreads.base, 1...256)
    count("servingThreads.max", c.servingThreads.max, max(1, c.servingThreads.base)...1024)
    if let why = applicationIDProblem(c.applicationID) { refuse("applicationID", c.applicationID, why) }
    if let m = c.metricsAddress {
      do throws(MetricsAddress.ParseError) { _ = try MetricsAddress(parsing: m.description) } catch {
        refuse("metricsAddress", m, error.description)
      }
    }
    return found
  }

  /// A module sees the application as `application:ID` (its caller); an ID is what a module ID
  /// may be made of, so the two never read alike and a log line cannot be forged through it.
  static func applicationIDProblem(_ id: String) -> String? {
    guard !id.isEmpty, id.utf8.count <= 128 else { return "expected 1 to 128 characters" }
    let allowed = id.unicodeScalars.allSatisfy { s in
      s.isASCII && (s.properties.isAlphabetic || ("0"..."9").contains(s) || s == "." || s == "-" || s == "_")
    }
    return allowed ? nil : "expected letters, digits, '.', '-' and '_' only"
  }
}

extension ForsettiHost.Configuration {
  /// Every setting out of its range, each naming its field; empty when the host may be made.
  public var settingProblems: [SettingProblem] { ConfigurationRules.problems(self) }

  /// This configuration when every setting is within its range; otherwise every problem, each
  /// naming its field (`isolation.maxRestarts`). `ForsettiHost.init` checks the same.
  public func validated() throws(ForsettiHostError) -> Self {
    let problems = ConfigurationRules.problems(self)
    guard problems.isEmpty else { throw .invalidSettings(problems) }
    return self
  }
}
