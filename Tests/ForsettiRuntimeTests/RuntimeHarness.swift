import CForsetti
import ForsettiBinary
import ForsettiCore
import ForsettiRuntime
import ForsettiTestSupport
import Foundation
import Glibc
import Testing

/// Real modules in a temporary directory (manifests/, plugins/, state/), gated and started by a
/// real `ModuleManager` in this process, with the log kept in memory.
final class RuntimeHarness {
  let dir = TemporaryDirectory("runtime")
  let log = MemoryLogSink()
  private(set) var manager: ModuleManager?

  /// Gates and starts everything installed so far.
  @discardableResult
  func start(
    approvals: ApprovalLedger = .init(approveAll: true), mode: ExecutionMode = .inProcess,
    applicationServices: ApplicationServices = ApplicationServices()
  ) throws -> ModuleManager {
    let report = try ManifestDiscovery.discover(from: DirectoryManifestSource(root: dir.url("manifests")))
    let context = GateContext(
      approvals: approvals, providers: ProviderAvailability(discovered: report.manifests))
    let index = BinaryIndex.build(directories: [dir.url("plugins")])
    let judgements = GateStack.judge(
      report, context: context, inspect: index.inspectionStep(for:), laterSteps: nil)
    let m = ModuleManager(
      environment: HostEnvironment(
        stateDirectory: dir.url("state"), log: log, applicationServices: applicationServices), mode: mode)
    m.activate(judgements, index: index)
    manager = m
    return m
  }

  /// Isolation with short timeouts and fast restarts, using the built forsetti-worker.
  static func isolated(
    maxRestarts: Int = 3, backoff: Double = 30, memoryMiB: UInt64 = 1024, startTimeout: Double = 4,
    stopTimeout: Double = 0.5
  ) -> ExecutionMode {
    let worker = ((HostBinary.path as NSString).deletingLastPathComponent as NSString).appendingPathComponent(
      "forsetti-worker")
    var s = IsolationSettings(workerExecutable: worker)
    // Starts of one level run at once and share the CPU: 2 s was tight for a 512 MiB memset on a
    // busy two-core machine once a spinning neighbour starts beside it.
    s.startTimeout = startTimeout
    s.stopTimeout = stopTimeout
    s.maxRestarts = maxRestarts
    s.backoffBase = backoff
    s.limits.memoryBytes = memoryMiB << 20
    return .isolated(s)
  }

  /// Runs supervision until `done` holds or `timeout` seconds pass (a safety net: generous, so a
  /// loaded machine only makes the wait longer, never the verdict different).
  @discardableResult
  func supervise(timeout: Double = 30, until done: () -> Bool) -> Bool {
    let end = Date().addingTimeInterval(timeout)
    while Date() < end {
      manager?.superviseOnce()
      if done() { return true }
      usleep(20_000)
    }
    return done()
  }

  /// Waits until some log line of `id` satisfies `match` (the timeout is a generous safety net).
  @discardableResult
  func waitForLine(_ id: String, timeout: Double = 30, _ match: (String) -> Bool) -> String? {
    let end = Date().addingTimeInterval(timeout)
    while Date() < end {
      if let l = lines(id).first(where: match) { return l }
      usleep(10_000)
    }
    return nil
  }

  func record(_ id: String) -> ModuleRecord? { manager?.records.first { $0.moduleID == id } }

  func state(_ id: String) -> ModuleState? { record(id)?.state }

  /// Log lines of one module (or the host, for nil), in order.
  func lines(_ id: String?) -> [String] { log.all.filter { $0.moduleID == id }.map(\.message) }

  /// Calls an `int name(void)` function exported by an already loaded fixture.
  func call(_ library: String, _ symbol: String) -> Int32? {
    guard let h = dlopen(library, RTLD_NOW | RTLD_NOLOAD), let f = dlsym(h, symbol) else { return nil }
    return unsafeBitCast(f, to: (@convention(c) () -> Int32).self)()
  }

  /// Calls a `const char *name(void)` function exported by an already loaded fixture.
  func string(_ library: String, _ symbol: String) -> String? {
    guard let h = dlopen(library, RTLD_NOW | RTLD_NOLOAD), let f = dlsym(h, symbol) else { return nil }
    return unsafeBitCast(f, to: (@convention(c) () -> UnsafePointer<CChar>?).self)().map {
      String(cString: $0)
    }
  }
}

/// Where a module under test runs: the two ways the host runs one, for suites that check each
/// promise both ways (isolated with short restarts, as a real host's default).
enum Placement: String, CaseIterable, CustomTestStringConvertible {
  case inProcess, isolated

  var testDescription: String { rawValue }

  var execution: ExecutionMode {
    // The suites using this check services, not deadlines: a start that works hard (a
    // red-team module flooding a service from four threads) gets as long as a loaded machine needs.
    self == .inProcess ? .inProcess : RuntimeHarness.isolated(maxRestarts: 5, backoff: 0.1, startTimeout: 60)
  }

  /// Manifest members (template 1.1) of a module that consumes the shared_database role.
  static let consumesSharedDatabase =
    #","manifestTemplateVersion":"1.1","runtimeRequirements":{"io":[],"dataIsolation":{"mode":"framework_mediated_shared"}}"#
}
