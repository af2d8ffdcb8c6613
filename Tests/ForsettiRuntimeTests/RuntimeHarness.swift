import CForsetti
import ForsettiBinary
import ForsettiCore
import ForsettiRuntime
import ForsettiTestSupport
import Foundation
import Glibc

/// Real modules in a temporary directory (manifests/, plugins/, state/), gated and started by a
/// real `ModuleManager` in this process, with the log kept in memory.
final class RuntimeHarness {
  let dir = TemporaryDirectory("runtime")
  let log = MemoryLogSink()
  private(set) var manager: ModuleManager?

  /// Gates and starts everything installed so far.
  @discardableResult
  func start(approvals: ApprovalLedger = .init(approveAll: true)) throws -> ModuleManager {
    let report = try ManifestDiscovery.discover(from: DirectoryManifestSource(root: dir.url("manifests")))
    let context = GateContext(
      approvals: approvals, providers: ProviderAvailability(discovered: report.manifests))
    let index = BinaryIndex.build(directories: [dir.url("plugins")])
    let judgements = GateStack.judge(
      report, context: context, inspect: index.inspectionStep(for:), laterSteps: nil)
    let m = ModuleManager(environment: HostEnvironment(stateDirectory: dir.url("state"), log: log))
    m.activate(judgements, index: index)
    manager = m
    return m
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
