import Dispatch
import ForsettiCore
import ForsettiRuntime
import Foundation
import Glibc

/// Hot reload in-process through the product's own path: a `LiveHost` as `dev --in-process
/// --approve-all --grace 0 --debounce 0` builds it, woken by its own watcher, judging with its
/// own `Judge` (every manifest, every binary, approvals, overrides, licences, trusted keys), then
/// reconciling and persisting. The figure is the report `dev` prints: from the watcher reading
/// the event to the new `start` returning. Only the debounce (a deliberate wait, 100 ms by
/// default) is set to zero.
enum ReloadBench {
  /// Reload latencies (ns) and, for each round, the cr.h-style floor of the same file.
  static func inProcess(dir: String, include: String, rounds: Int, floors: Floors) throws -> (
    reload: [Double], raw: [Double]
  ) {
    let hot = Fixtures.module(id: "com.bench.hot", entry: "hot_entry", start: "return FORSETTI_OK;")
    try Fixtures.install(hot, in: dir, include: include)
    let state = dir + "/state"
    let config = HostConfiguration(
      manifestsDirectory: dir + "/manifests", pluginDirectories: [dir + "/plugins"], approveAll: true,
      stateDirectory: state)
    let manager = ModuleManager(environment: HostEnvironment(stateDirectory: state, log: MemoryLogSink()))
    manager.versionCopies = true
    let woken = DispatchSemaphore(value: 0)
    let host = LiveHost(
      judge: Judge(config), manager: manager, development: .init(grace: 0, debounce: 0),
      wake: { woken.signal() })
    var reports: [ReloadReport] = []
    host.onReload = { reports.append($0) }
    try host.start()
    defer { host.stop() }
    var latencies: [Double] = []
    var raws: [Double] = []
    for n in 0..<rounds {
      while woken.wait(timeout: .now()) == .success {}
      reports.removeAll()
      // A distinct build each time, renamed into place as a build tool's last step does.
      let variant = Fixtures.module(
        id: "com.bench.hot", entry: "hot_entry", start: "volatile int v = \(n); (void)v; return FORSETTI_OK;")
      try Fixtures.build(variant, to: dir + "/next.so", include: include)
      rename(dir + "/next.so", dir + "/plugins/hot_entry.so")
      let deadline = DispatchTime.now() + 5
      while reports.isEmpty, woken.wait(timeout: deadline) == .success { host.process() }
      tally(reports, dir: dir, round: n, floors: floors, latencies: &latencies, raws: &raws)
    }
    return (latencies, raws)
  }

  /// One round's figures: the reload's duration when it reloaded, and the C floor's copy +
  /// dlopen + dlsym of the same file beside it.
  static func tally(
    _ reports: [ReloadReport], dir: String, round n: Int, floors: Floors, latencies: inout [Double],
    raws: inout [Double]
  ) {
    if let r = reports.first, r.outcome == .reloaded {
      latencies.append(
        Double(r.duration.components.seconds) * 1e9
          + Double(r.duration.components.attoseconds / 1_000_000_000))
    }
    if let raw = floors.reload(
      dir + "/plugins/hot_entry.so", symbol: "hot_entry", scratch: dir + "/raw-\(n).so")
    {
      raws.append(raw)
    }
  }
}
