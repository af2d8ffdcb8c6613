/// What `forsetti-bench --help` (and `scripts/bench --help`) prints.
enum BenchUsage {
  static let text = """
    usage: scripts/bench [--quick] [--json] [--only SECTION] [--peers]

    Builds forsetti-bench in release mode and prints each figure as a median over alternated
    rounds with min–max, next to its floor or peer measured in the same run, and the ratio.
    Floors are the raw operations in plain C (Benchmarks/floors/floors.c, built with cc here):
    copy + dlopen + dlsym for reload, manifest read + libelf scan for gating, posix_spawn of
    /bin/true for process start, a socketpair echo for calls across processes.

      --quick          fewer rounds and smaller fixtures, for a fast look
      --json           one JSON object: every row with its floor or peer and the ratio
      --only SECTION   one section: gating, activation, calls, roundtrip, roles, spawn, reload,
                       peers, scale, running, neighbours, upgrade (and gating-loop, micro
                       for profilers)
                       scale: 1,000 modules under a real `forsetti-host run`: all started,
                       all stopped (SIGTERM), the host's threads and RSS
                       running: a module enabled in a running host (control socket) until
                       its start, which makes one host call, returned
                       roles: a role call beside a host call, then providers of
                       concurrency 1, 4, 16 under 1, 4, 16 consumer modules (calls/s,
                       p50/p95) and a polite consumer alone and beside a flooding one
                       upgrade: `forsetti-host upgrade` of a real host with 1 and 200
                       modules, one calling the host every 5 ms: upgrade → the new image
                       answering, the module's longest gap between calls, against a restart
      --peers          adds HashiCorp go-plugin beside every row it has a counterpart for
                       (installs Debian's Go packages if missing; builds offline)
      --host PATH      the forsetti-host the scale and running rows run (its forsetti-worker
                       beside it): another build's, for a before/after with the same bench
      -h, --help       this text
    """
}
