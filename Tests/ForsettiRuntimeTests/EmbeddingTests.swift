import ForsettiCore
import ForsettiRuntime
import ForsettiTestSupport
import Foundation
import Synchronization
import Testing

/// The runtime as an application embeds it, without the command line: its own entitlement
/// source and capability policy, the host's changes observed as they happen.
@Suite(.onTestThreads, .serialized) struct EmbeddingTests {
  /// Purchases an application keeps itself: unlocked while the flag is set.
  final class Purchases: EntitlementProvider {
    let owned = Mutex<Set<String>>([])
    func isUnlocked(productID: String, moduleID: String) -> Bool { owned.withLock { $0.contains(productID) } }
    var name: String { "the application's purchases" }
  }

  @Test func anApplicationsEntitlementSourceAndObserverDriveTheHost() throws {
    let r = ReconcilerTests.Rig()
    try r.module("com.test.paid", product: "com.vendor.pro")
    try r.module("com.test.free")
    let purchases = Purchases()
    let config = HostConfiguration(
      manifestsDirectory: r.h.dir.url("manifests"), pluginDirectories: [r.h.dir.url("plugins")],
      policy: FixedCapabilityPolicy([]), approveAll: true, stateDirectory: r.state,
      entitlementSource: purchases)
    let manager = ModuleManager(environment: HostEnvironment(stateDirectory: r.state, log: r.h.log))
    let host = LiveHost(judge: Judge(config), manager: manager) {}
    var seen: [String] = []
    host.onChange = { change in
      if case .module(let record) = change { seen.append("\(record.moduleID ?? "-") \(record.state)") }
    }
    try host.start()
    defer { host.stop() }
    #expect(seen.contains("com.test.free started"), "\(seen)")
    #expect(seen.contains("com.test.paid blocked (moduleLocked)"), "\(seen)")

    // The application records a purchase and asks the host to judge again.
    purchases.owned.withLock { _ = $0.insert("com.vendor.pro") }
    seen.removeAll()
    host.reconcile()
    host.process()
    #expect(seen == ["com.test.paid started"], "\(seen)")
    #expect(manager.isRunning("com.test.paid"))

    // And a refund stops it, with the gate's reason.
    purchases.owned.withLock { $0.removeAll() }
    seen.removeAll()
    host.reconcile()
    host.process()
    #expect(seen == ["com.test.paid blocked (moduleLocked)"], "\(seen)")
    #expect(!manager.isRunning("com.test.paid"))
    #expect(manager.isRunning("com.test.free"))
  }
}
