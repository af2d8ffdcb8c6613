import ForsettiCore
import ForsettiRuntime
import Foundation
import Synchronization

/// While the host runs, trust decisions are re-evaluated when they can change: a file of
/// licences, keys, overrides or approvals changes (inotify), or an instant passes at which a
/// licence expires or a time-frame override begins or ends. Modules no longer unlocked are
/// stopped; modules whose approved capabilities changed restart with the new grant.
final class EntitlementWatch {
  private let options: HostOptions
  private let discovered: [ModuleManifest]
  private let changed = ChangeFlag()
  private var watcher: FileWatcher?
  private(set) var nextDue: ContinuousClock.Instant?

  init(options: HostOptions, discovered: [ModuleManifest], wake: @escaping @Sendable () -> Void) {
    self.options = options
    self.discovered = discovered
    let state = options.stateDirectory
    let dirs =
      [state, state + "/licences", state + "/trusted-keys"]
      + (options.entitlementsFile.map { [($0 as NSString).deletingLastPathComponent] } ?? [])
    for d in dirs {
      try? FileManager.default.createDirectory(atPath: d.isEmpty ? "." : d, withIntermediateDirectories: true)
    }
    let flag = changed
    let files = Set(["approvals.json", "overrides.json"])
    let entitlements = options.entitlementsFile.map { ($0 as NSString).lastPathComponent }
    watcher = try? FileWatcher(directories: dirs.map { $0.isEmpty ? "." : $0 }, recursive: false) { path, _ in
      let name = (path as NSString).lastPathComponent
      let dir = (path as NSString).deletingLastPathComponent
      let relevant =
        files.contains(name) || name == entitlements || dir.hasSuffix("/licences")
        || dir.hasSuffix("/trusted-keys")
      if relevant {
        flag.set()
        wake()
      }
    }
    schedule(now: GateContext.wallClock())
  }

  /// Re-evaluates when something changed or an instant came; call on the main thread.
  func process(_ manager: ModuleManager) {
    let due = nextDue.map { ContinuousClock.now >= $0 } ?? false
    guard changed.take() || due else { return }
    guard let context = try? options.gateContext(discovered: discovered) else { return }
    let grants = manager.grants
    for m in manager.startedManifests {
      let e = context.entitlement(m)
      if !e.unlocked {
        manager.stopLocked(m.moduleID, detail: "no longer unlocked: \(e.summary)")
        continue
      }
      let now = ApprovalRules.granted(m, approvals: context.approvals)
      if let before = grants[m.moduleID], now != before { manager.regrant(m.moduleID, now) }
    }
    schedule(now: context.now)
  }

  /// The next instant at which a licence expires or a time-frame override starts or ends.
  private func schedule(now: Instant) {
    let licences = LicenceEntitlementProvider.load(
      stateDirectory: options.stateDirectory, staticProducts: [], now: now)
    let overrides = OverrideStore(stateDirectory: options.stateDirectory).load()
    let edges = (Array(overrides.modules.values) + Array(overrides.products.values)).flatMap { e in
      [e.from, e.until].compactMap { $0.flatMap(Licence.parseTime) }
    }
    let next = ([licences.nextExpiry].compactMap { $0 } + edges).filter { $0 > now }.min()
    nextDue = next.map { ContinuousClock.now + .wait($0 - now) + .milliseconds(1) }
  }
}

/// Set by the watcher thread, taken by the main loop.
final class ChangeFlag: Sendable {
  private let value = Mutex(false)
  func set() { value.withLock { $0 = true } }
  func take() -> Bool {
    value.withLock { v in
      defer { v = false }; return v
    }
  }
}
