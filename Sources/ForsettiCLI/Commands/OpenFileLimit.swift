import Glibc

/// The host's open-file limit: its soft limit raised to the hard one at start. systemd's default
/// soft limit (1024, `LimitNOFILE=1024:524288`) is kept for programs that use select(); the host
/// uses poll and epoll, and under 1024 its page fell to 600 half-open connections. The page, the
/// metrics and the control socket keep their per-client caps under whatever the limit is; each
/// worker sets its own (`Confinement`).
enum OpenFileLimit {
  /// Raises the soft limit to the hard one, capped at `ceiling` (an unlimited hard limit would
  /// make every per-descriptor table the size of that); the soft limit now.
  @discardableResult
  static func raise(ceiling: rlim_t = 1 << 20) -> rlim_t {
    let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    var limit = rlimit()
    guard getrlimit(resource, &limit) == 0 else { return 0 }
    let wanted = min(limit.rlim_max, ceiling)
    guard limit.rlim_cur < wanted else { return limit.rlim_cur }
    var raised = limit
    raised.rlim_cur = wanted
    return setrlimit(resource, &raised) == 0 ? wanted : limit.rlim_cur
  }
}
