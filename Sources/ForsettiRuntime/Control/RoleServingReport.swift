import ForsettiCore

/// What `explain` and the debug page show of a module serving its role in a running host: the
/// role, how many calls it runs at once, the calls waiting and running now, and the calls its
/// consumers were answered busy or that timed out (as `/metrics` counts them).
enum RoleServingReport {
  /// One member per module that serves a role now.
  static func make(_ environment: HostEnvironment) -> [String: JSONValue] {
    var out: [String: JSONValue] = [:]
    for s in environment.services.roles.serving {
      let counters = environment.metrics.module(s.moduleID)
      counters.collectChannelCalls()
      var o = JSONObject()
      o["role"] = .string(s.role.rawValue)
      o["where"] = .string(s.inProcess ? "in-process" : "worker")
      if s.inProcess {
        o["concurrency"] = .number(String(s.slots))
        o["queued"] = .number(String(s.queued))
        o["inFlight"] = .number(String(s.running))
      } else {
        let lanes = counters.roleLoad
        o["concurrency"] = .number(String(environment.roleChannels.concurrency(of: s.moduleID) ?? 1))
        o["queued"] = .number(String(lanes.queued &+ UInt64(s.queued)))
        o["inFlight"] = .number(String(lanes.running))
      }
      o["busyTotal"] = .number(String(counters.roleBusy.load(ordering: .relaxed)))
      o["timeoutsTotal"] = .number(String(counters.roleTimedOut.load(ordering: .relaxed)))
      out[s.moduleID] = .object(o)
    }
    return out
  }
}
