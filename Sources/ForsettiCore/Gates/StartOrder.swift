/// The order modules start in: a module that holds a default role starts before every module
/// that consumes that role (through `requiredDefaultRoles`, an I/O kind of the role, or
/// framework-mediated shared data); otherwise modules start in module-ID order. Stop order is
/// the reverse.
public enum StartOrder {
  public static func order(_ manifests: [ModuleManifest]) -> [ModuleManifest] {
    let sorted = manifests.sorted { $0.moduleID.utf8.lexicographicallyPrecedes($1.moduleID.utf8) }
    let dependsOn = dependencies(sorted)
    // Counts, not sets, per step: a thousand modules cost a pass over flags, not a thousand
    // set filters (the stop of 1,000 modules spent ~0.1 s here).
    var waiting = sorted.map { dependsOn[$0.moduleID]?.count ?? 0 }
    var waitingOn: [String: [Int]] = [:]
    for (i, m) in sorted.enumerated() {
      for p in dependsOn[m.moduleID] ?? [] { waitingOn[p, default: []].append(i) }
    }
    var taken = [Bool](repeating: false, count: sorted.count)
    var done = Set<String>()
    var out: [ModuleManifest] = []
    out.reserveCapacity(sorted.count)
    var first = 0
    while out.count < sorted.count {
      while taken[first] { first += 1 }
      // The first (by ID) module whose providers have all started; on a cycle, the first left.
      var next = first
      for i in first..<sorted.count where !taken[i] && waiting[i] == 0 {
        next = i
        break
      }
      taken[next] = true
      out.append(sorted[next])
      if done.insert(sorted[next].moduleID).inserted {
        for i in waitingOn[sorted[next].moduleID] ?? [] { waiting[i] -= 1 }
      }
    }
    return out
  }

  /// The same dependencies as levels: every module of a level depends only on modules of earlier
  /// levels, so the modules of one level may start at the same time. Each level is in module-ID
  /// order; on a cycle the first module left (by ID) forms a level of its own, as in `order`.
  public static func levels(_ manifests: [ModuleManifest]) -> [[ModuleManifest]] {
    let sorted = manifests.sorted { $0.moduleID.utf8.lexicographicallyPrecedes($1.moduleID.utf8) }
    let dependsOn = dependencies(sorted)
    var done = Set<String>()
    var out: [[ModuleManifest]] = []
    var pending = sorted
    while let first = pending.first {
      var level = pending.filter { dependsOn[$0.moduleID, default: []].isSubset(of: done) }
      if level.isEmpty { level = [first] }
      let ids = Set(level.map(\.moduleID))
      done.formUnion(ids)
      pending.removeAll { ids.contains($0.moduleID) }
      out.append(level)
    }
    return out
  }

  /// For each module (of `sorted`, in ID order), the IDs of the providers it waits for.
  private static func dependencies(_ sorted: [ModuleManifest]) -> [String: Set<String>] {
    var providers: [DefaultModuleRole: Set<String>] = [:]
    for m in sorted { if let r = m.defaultModuleRole { providers[r, default: []].insert(m.moduleID) } }
    var dependsOn: [String: Set<String>] = [:]
    for m in sorted {
      for role in consumedRoles(m) {
        dependsOn[m.moduleID, default: []].formUnion(providers[role, default: []].subtracting([m.moduleID]))
      }
    }
    return dependsOn
  }

  /// The roles `m` needs some other module to provide.
  public static func consumedRoles(_ m: ModuleManifest) -> Set<DefaultModuleRole> {
    guard let rr = m.runtimeRequirements else { return [] }
    var roles = Set(rr.dataIsolation.requiredDefaultRoles)
    for io in rr.io { if let r = io.kind.providingRole { roles.insert(r) } }
    if rr.dataIsolation.mode == .frameworkMediatedShared { roles.insert(.sharedDatabase) }
    return roles
  }
}
