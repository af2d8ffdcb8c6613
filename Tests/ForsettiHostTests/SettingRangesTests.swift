import ForsettiHost
import ForsettiTestSupport
import Foundation
import Testing

/// Every range a host setting has, refused the same way wherever it is set: through the facade
/// (`set(_:to:)` and `validated()`), through the C API (`forsetti_embed_config_set`) and on the
/// command line (`run --print-config`); each refusal names the setting, and the facade's and the
/// C API's the configuration's field.
@Suite(.onTestThreads) struct SettingRangesTests {
  let dir = TemporaryDirectory("setting-ranges")

  /// A key of the table, a value out of range or malformed, the field it names, and what the
  /// refusal says.
  struct Case: Sendable {
    var key: String
    var value: String
    var field: String
    var says: String
  }

  static let cases: [Case] = [
    Case(
      key: "memory-limit", value: "99999999", field: "isolation.limits.memoryBytes",
      says: "at most 16777216 MiB"),
    Case(
      key: "tmpdir-size", value: "2000000", field: "isolation.limits.temporaryBytes",
      says: "at most 1048576 MiB"),
    Case(key: "sandbox-quota", value: "1e300", field: "isolation.sandboxBytes", says: "at most 16777216 MiB"),
    Case(
      key: "cpu-limit", value: "2e9", field: "isolation.limits.cpuSeconds",
      says: "expected at most 1000000000 seconds"),
    Case(key: "cpu-weight", value: "com.a=0", field: "isolation.cpu.weights", says: "from 1 to 10000"),
    Case(key: "cpu-max", value: "0", field: "isolation.cpu.maxPercents", says: "from 1 to 100000"),
    Case(key: "max-restarts", value: "1001", field: "isolation.maxRestarts", says: "expected 0 to 1000"),
    Case(
      key: "start-timeout", value: "2e9", field: "isolation.startTimeout",
      says: "seconds from 0 to 1000000000"),
    Case(
      key: "stop-timeout", value: "-1", field: "isolation.stopTimeout", says: "expected a non-negative number"
    ),
    Case(
      key: "worker-env", value: "A B", field: "isolation.workerEnvironment", says: "is not a variable name"),
    Case(
      key: "log-rate", value: "0", field: "logLimits.linesPerSecond",
      says: "expected 1 to 1000000 lines a second, not 0"),
    Case(
      key: "log-burst", value: "2e7", field: "logLimits.burstLines",
      says: "expected 1 to 10000000 lines, not 20000000"),
    Case(
      key: "log-file-size", value: "0", field: "logLimits.maxFileBytes",
      says: "expected 4096 to 1099511627776 bytes (4 KiB to 1 TiB), not 0"),
    Case(key: "log-files", value: "0", field: "logLimits.keptFiles", says: "expected 1 to 1000 files, not 0"),
    Case(
      key: "storage-quota", value: "2000000", field: "quotas.secureStorageBytes", says: "at most 1048576 MiB"),
    Case(key: "export-quota", value: "1e300", field: "quotas.exportBytes", says: "at most 16777216 MiB"),
    Case(key: "metrics", value: "99999", field: "metricsAddress", says: "has no port"),
  ]

  /// Keys the command line's `run` has no option for (an application names itself).
  static let applicationOnly = [
    Case(key: "application-id", value: "my app", field: "applicationID", says: "letters, digits")
  ]

  var configuration: ForsettiHost.Configuration {
    ForsettiHost.Configuration(
      manifestsDirectory: dir.url("manifests"), pluginDirectories: [dir.url("plugins")],
      stateDirectory: dir.url("state"))
  }

  /// The facade's refusal of `c`: from `set`, else from the ranges.
  func facadeRefusal(_ c: Case) -> SettingProblem? {
    var configuration = self.configuration
    do throws(SettingProblem) { try configuration.set(c.key, to: c.value) } catch { return error }
    do { _ = try configuration.validated() } catch {
      if case .invalidSettings(let problems) = error { return problems.first }
    }
    return nil
  }

  @Test func theFacadeRefusesEveryRangeNamingTheField() throws {
    for c in Self.cases + Self.applicationOnly {
      let problem = try #require(facadeRefusal(c), "\(c.key) \(c.value) was accepted")
      #expect(problem.setting.hasPrefix(c.field), "\(c.key): \(problem)")
      #expect(problem.why.contains(c.says), "\(c.key): \(problem)")
    }
    // Set directly, not as text: the same ranges, every problem at once, when the host is made.
    var direct = configuration
    direct.isolation?.maxRestarts = 5000
    direct.servingThreads = (0, 0)
    direct.development = DevelopmentSettings(grace: .nan, debounce: 0.1)
    direct.exportDirectory = "relative/exports"
    direct.applicationID = "application:forged"
    #expect(throws: ForsettiHostError.self) { try ForsettiHost(direct) }
    let named = direct.settingProblems.map(\.setting)
    for field in [
      "isolation.maxRestarts", "servingThreads.base", "servingThreads.max", "development.grace",
      "exportDirectory",
      "applicationID",
    ] {
      #expect(named.contains(field), "\(field) not refused: \(direct.settingProblems)")
    }
    // The control: run's defaults and good values are accepted.
    var good = configuration
    for (key, value) in [
      ("memory-limit", "512"), ("cpu-weight", "com.a=300"), ("max-restarts", "0"), ("log-rate", "5"),
      ("metrics", "127.0.0.1:0"), ("application-id", "com.example.editor"), ("in-process", "false"),
    ] {
      try good.set(key, to: value)
    }
    #expect(good.settingProblems.isEmpty, "\(good.settingProblems)")
    #expect(good.isolation?.limits.memoryBytes == 512 << 20)
    #expect(good.isolation?.cpu.weights["com.a"] == 300)
    #expect(good.applicationID == "com.example.editor")
    // Hot reload's tuning never turns it on.
    try good.set("grace", to: "1")
    try good.set("debounce", to: "50")
    #expect(good.development == nil)
    good.development = DevelopmentSettings(grace: 0.5, debounce: 0.1)
    try good.set("debounce", to: "50")
    #expect(good.development == DevelopmentSettings(grace: 0.5, debounce: 0.05))
  }

  @Test func theCommandLineRefusesTheSameNamingItsOption() throws {
    try FileManager.default.createDirectory(atPath: dir.url("plugins"), withIntermediateDirectories: true)
    let base = [
      "run", "--print-config", "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"),
      "--state", dir.url("state"),
    ]
    // Every bad value at once: each is said, not only the first.
    let r = try HostBinary.run(base + Self.cases.flatMap { ["--\($0.key)", $0.value] })
    #expect(r.status == 2, "\(r.stderr)")
    let lines = r.stderr.split(separator: "\n")
    for c in Self.cases {
      // Its own line: reasons are shared between options, so the whole output would not tell.
      let line = lines.first { $0.contains("invalid value '\(c.value)' for '--\(c.key)'") }
      #expect(line?.contains(c.says) == true, "--\(c.key) \(c.value) not refused as expected:\n\(r.stderr)")
    }
    let good = try HostBinary.run(base + ["--memory-limit", "512", "--max-restarts", "0", "--log-rate", "5"])
    #expect(good.status == 0, "\(good.stderr)")
    let dev = try HostBinary.run(
      [
        "dev", "--print-config", "--plugins", dir.url("plugins"), "--state", dir.url("state"), "--grace",
        "2e9",
      ])
    #expect(dev.status == 2 && dev.stderr.contains("'--grace'"), "\(dev.stderr)")
  }

  @Test func theCAPIRefusesTheSameNamingKeyAndField() throws {
    let embed = EmbedCAPITests()
    let prefix = try embed.install()
    let program = try embed.build(Self.setter, named: "setter", prefix: prefix)
    let all = Self.cases + Self.applicationOnly
    let r = try ProcessRunner.run(program, all.flatMap { [$0.key, $0.value] } + ["memory-limit", "512"])
    #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
    let lines = r.stdout.split(separator: "\n").map(String.init)
    for (c, line) in zip(all, lines) {
      #expect(line.hasPrefix("\(c.key) 3 \(c.key) '\(c.value)': \(c.field)"), "\(line)")
      #expect(line.contains(c.says), "\(line)")
    }
    #expect(lines.last == "memory-limit ok", "the control: \(r.stdout)")
  }

  /// Sets each KEY VALUE pair of its arguments on one configuration and prints the outcome.
  static let setter = #"""
    #include <forsetti/embed.h>
    #include <stdio.h>

    int main(int argc, char **argv) {
      forsetti_embed_config *c = forsetti_embed_config_new();
      for (int i = 1; i + 1 < argc; i += 2) {
        forsetti_embed_error *e = forsetti_embed_config_set(c, argv[i], argv[i + 1]);
        if (e == NULL) {
          printf("%s ok\n", argv[i]);
        } else {
          printf("%s %d %s\n", argv[i], (int)forsetti_embed_error_code(e), forsetti_embed_error_message(e));
          forsetti_embed_error_delete(e);
        }
      }
      forsetti_embed_config_delete(c);
      return 0;
    }
    """#
}
