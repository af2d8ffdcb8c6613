import ForsettiCore
import ForsettiRuntime

/// While the host runs: modules that are no longer unlocked (a licence expired or its file
/// changed, an override turned off) are stopped.
enum EntitlementWatch {
  static func recheck(_ manager: ModuleManager, options: HostOptions, discovered: [ModuleManifest]) {
    guard let context = try? options.gateContext(discovered: discovered) else { return }
    for m in manager.startedManifests {
      let e = context.entitlement(m)
      if !e.unlocked { manager.stopLocked(m.moduleID, detail: "no longer unlocked: \(e.summary)") }
    }
  }
}
