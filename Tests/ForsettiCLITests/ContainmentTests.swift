import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

/// Hostile modules against a real `forsetti-host run`, as root and as an unprivileged user: each
/// attack on the machine, the host, another worker or the network is refused or contained, and a
/// healthy module beside them keeps being served.
@Suite(.onTestThreads, .serialized) struct ContainmentTests {
  /// C helpers every hostile fixture shares: `said` logs what a call returned.
  static let prelude = """
    #include <errno.h>
    #include <sched.h>
    #include <signal.h>
    #include <time.h>
    #include <sys/time.h>
    #include <sys/resource.h>
    #include <sys/socket.h>
    #include <sys/stat.h>
    #include <sys/sysmacros.h>
    #include <sys/syscall.h>
    #include <sys/klog.h>
    #include <sys/mman.h>
    #include <sys/shm.h>
    #include <sys/xattr.h>
    #include <sys/ioctl.h>
    #include <linux/fs.h>
    #include <sys/un.h>
    #include <netinet/in.h>
    #include <arpa/inet.h>
    #include <linux/netlink.h>
    #include <linux/rtnetlink.h>
    #include <linux/if_ether.h>
    static void said(const char *what, long rc) {
      char l[300];
      if (rc >= 0) snprintf(l, sizeof l, "attack %s: succeeded", what);
      else snprintf(l, sizeof l, "attack %s: refused (%s)", what, strerror(errno));
      fixture_log(l);
    }
    """

  static func fixture(_ id: String, _ entry: String, start: String, prelude extra: String = "")
    -> ModuleFixture
  {
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.prelude = prelude + "\n" + extra
    f.start = start
    return f
  }

  /// The clock, the hostname, the kernel log, device nodes.
  static func machine(sandbox: String, outside: String, library: String) -> ModuleFixture {
    fixture(
      "com.hostile.machine", "machine_entry",
      start: """
        struct timeval tv; gettimeofday(&tv, NULL);
        // The current time and name: a regression must not hurt the machine running the tests.
        said("settimeofday", settimeofday(&tv, NULL));
        struct timespec ts; clock_gettime(CLOCK_REALTIME, &ts);
        said("clock_settime", clock_settime(CLOCK_REALTIME, &ts));
        char name[256] = {0}; gethostname(name, sizeof name - 1);
        said("sethostname", sethostname(name, strlen(name)));
        char buf[4096];
        said("syslog read", klogctl(3, buf, sizeof buf));
        int k = open("/dev/kmsg", O_WRONLY);
        said("open /dev/kmsg", k);
        if (k >= 0) { said("write /dev/kmsg", write(k, "forsetti hostile\\n", 17)); close(k); }
        said("mknodat 1:1", mknodat(AT_FDCWD, "\(sandbox)/mem", S_IFCHR | 0600, makedev(1, 1)));
        said("mknodat 1:11", mknodat(AT_FDCWD, "\(sandbox)/kmsg", S_IFCHR | 0600, makedev(1, 11)));
        int m = open("\(sandbox)/kmsg", O_WRONLY);
        said("open mknod'ed kmsg", m);
        if (m >= 0) { said("write mknod'ed kmsg", write(m, "forsetti hostile\\n", 17)); close(m); }
        said("mkfifo in the sandbox", mkfifo("\(sandbox)/fifo", 0600));
        // Files the worker's uid owns, which landlock does not guard against these calls.
        said("chmod of a file outside the sandbox", chmod("\(outside)", 0666));
        int lib = open("\(library)", O_RDONLY);
        said("fchmod of its own library", fchmod(lib, 0777));
        said("fsetxattr of its own library", fsetxattr(lib, "user.forsetti", "x", 1, 0));
        int flags = 0;
        said("chattr of its own library", ioctl(lib, FS_IOC_SETFLAGS, &flags));
        said("chown of a file outside the sandbox", chown("\(outside)", getuid(), getgid()));
        // The same through calls newer than Debian 12's libseccomp, by number (one on every
        // architecture since Linux 5.1): fchmodat2 452, setxattrat 463, file_setattr 469.
        said("fchmodat2 of a file outside the sandbox", syscall(452, AT_FDCWD, "\(outside)", 0666, 0));
        struct { unsigned long long value; unsigned int size, flags; } xa = {(unsigned long long)(uintptr_t)"x", 1, 0};
        said("setxattrat of a file outside the sandbox", syscall(463, AT_FDCWD, "\(outside)", 0, "user.forsetti", &xa, sizeof xa));
        char fa[32] = {0};
        said("file_setattr of a file outside the sandbox", syscall(469, AT_FDCWD, "\(outside)", fa, 24, 0));
        if (lib >= 0) close(lib);
        // Memory outside RLIMIT_AS, refused while no memory cgroup counts it.
        said("memfd_create", memfd_create("hoard", 0));
        said("shmget", shmget(IPC_PRIVATE, 1 << 20, IPC_CREAT | 0600));
        return FORSETTI_OK;
        """)
  }

  /// Priority, CPUs, limits and signals of the host (its parent) and of another worker, whose
  /// pid arrives in an event.
  static func pids(done: String) -> ModuleFixture {
    fixture(
      "com.hostile.pids", "pids_entry",
      start: """
        const forsetti_events *e = host->resolve(FORSETTI_SERVICE_EVENTS);
        return e->subscribe("victim.pid", on_pid, NULL) > 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
        """,
      prelude: """
        static int attacked;
        static void attack(const char *whose, pid_t pid) {
          char what[120];
          snprintf(what, sizeof what, "setpriority %s", whose);
          said(what, setpriority(PRIO_PROCESS, pid, 19));
          cpu_set_t one; CPU_ZERO(&one); CPU_SET(0, &one);
          snprintf(what, sizeof what, "sched_setaffinity %s", whose);
          said(what, sched_setaffinity(pid, sizeof one, &one));
          struct rlimit ten = {10, 10};
          snprintf(what, sizeof what, "prlimit NOFILE %s", whose);
          said(what, prlimit(pid, RLIMIT_NOFILE, &ten, NULL));
          struct rlimit cpu = {1, 1};
          snprintf(what, sizeof what, "prlimit CPU %s", whose);
          said(what, prlimit(pid, RLIMIT_CPU, &cpu, NULL));
          snprintf(what, sizeof what, "kill SIGCONT %s", whose);
          said(what, kill(pid, SIGCONT));
          snprintf(what, sizeof what, "pidfd_open %s", whose);
          long fd = syscall(SYS_pidfd_open, pid, 0);
          said(what, fd);
          if (fd >= 0) close((int)fd);
        }
        static void on_pid(void *c, const char *source, const char *type, const void *p, size_t n) {
          (void)c; (void)source; (void)type;
          if (attacked++) return;
          char text[32] = {0}; memcpy(text, p, n < 31 ? n : 31);
          said("open /proc to find other pids", open("/proc", O_RDONLY | O_DIRECTORY));
          attack("of the host", getppid());
          // The same call past the filter's reading of it: another ABI, or bits the kernel ignores.
          #if defined(__x86_64__)
          { long r; __asm__ volatile("int $0x80" : "=a"(r) : "a"(37L), "b"((long)getppid()), "c"((long)SIGCONT) : "memory");
            if (r < 0) { errno = (int)-r; r = -1; }
            said("kill of the host through the i386 ABI", r); }
          #endif
          said("kill of the host with high bits set", syscall(SYS_kill, (1L << 32) | getppid(), SIGCONT));
          // A descriptor whose owner is the host would signal it on I/O (SIGIO, or any F_SETSIG).
          int sv[2]; socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
          said("F_SETOWN to the host", fcntl(sv[0], F_SETOWN, getppid()));
          struct f_owner_ex owner = {F_OWNER_PID, getppid()};
          said("F_SETOWN_EX to the host", fcntl(sv[0], F_SETOWN_EX, &owner));
          int host_pid = getppid();
          said("FIOSETOWN to the host", ioctl(sv[0], FIOSETOWN, &host_pid));
          said("F_SETOWN to itself", fcntl(sv[0], F_SETOWN, getpid()));
          attack("of another worker", (pid_t)atoi(text));
          said("setpriority of the host's group", setpriority(PRIO_PGRP, 0, 19));
          said("kill SIGCONT of the host's group", kill(0, SIGCONT));
          said("setpriority of itself", setpriority(PRIO_PROCESS, 0, 1));
          struct rlimit mine; getrlimit(RLIMIT_NOFILE, &mine);
          said("prlimit of itself", prlimit(0, RLIMIT_NOFILE, &mine, NULL));
          said("kill SIGCONT of itself", kill(getpid(), SIGCONT));
          int done = open("\(done)", O_WRONLY | O_CREAT, 0644);
          if (done >= 0) close(done);
          const forsetti_events *e = g_host->resolve(FORSETTI_SERVICE_EVENTS);
          e->publish("attacks.done", "", 0);
        }
        """)
  }

  /// Packet, netlink and pathname unix sockets; with networking also TCP to a loopback listener.
  static func sockets(_ id: String, _ entry: String, unixPath: String, tcpPort: UInt16) -> ModuleFixture {
    fixture(
      id, entry,
      start: """
        int s = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
        said("AF_PACKET socket", s);
        if (s >= 0) close(s);
        s = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
        said("raw IP socket", s);
        if (s >= 0) close(s);
        s = socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
        said("AF_NETLINK socket", s);
        if (s >= 0) {
          struct { struct nlmsghdr h; struct rtmsg r; } q;
          memset(&q, 0, sizeof q);
          q.h.nlmsg_len = sizeof q; q.h.nlmsg_type = RTM_GETROUTE; q.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
          q.r.rtm_family = AF_INET;
          said("netlink route dump request", send(s, &q, sizeof q, 0));
          char buf[8192];
          said("netlink route dump reply", recv(s, buf, sizeof buf, MSG_DONTWAIT));
          close(s);
        }
        s = socket(AF_UNIX, SOCK_STREAM, 0);
        said("AF_UNIX socket", s);
        if (s >= 0) {
          struct sockaddr_un a; memset(&a, 0, sizeof a); a.sun_family = AF_UNIX;
          strncpy(a.sun_path, "\(unixPath)", sizeof a.sun_path - 1);
          said("connect to a unix socket outside the sandbox", connect(s, (struct sockaddr *)&a, sizeof a));
          close(s);
        }
        int pair[2];
        said("AF_UNIX socketpair", socketpair(AF_UNIX, SOCK_STREAM, 0, pair));
        s = socket(AF_INET, SOCK_STREAM, 0);
        said("TCP socket", s);
        if (s >= 0) {
          struct sockaddr_in a; memset(&a, 0, sizeof a); a.sin_family = AF_INET;
          a.sin_port = htons(\(tcpPort)); a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
          said("TCP connect to loopback", connect(s, (struct sockaddr *)&a, sizeof a));
          close(s);
        }
        return FORSETTI_OK;
        """)
  }

  /// The healthy module: publishes its pid until the attacks are over, then says it was served.
  static var victim: ModuleFixture {
    fixture(
      "com.healthy.victim", "victim_entry",
      start: """
        const forsetti_events *e = host->resolve(FORSETTI_SERVICE_EVENTS);
        if (e->subscribe("attacks.done", on_done, NULL) <= 0) return FORSETTI_ERR_START_FAILED;
        pthread_t t;
        return pthread_create(&t, NULL, announce, (void *)e) == 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
        """,
      prelude: """
        #include <pthread.h>
        static volatile int served;
        static void on_done(void *c, const char *source, const char *type, const void *p, size_t n) {
          (void)c; (void)type; (void)p; (void)n;
          served = 1;
          char l[200]; snprintf(l, sizeof l, "served after the attacks of %s", source); fixture_log(l);
        }
        static void *announce(void *arg) {
          const forsetti_events *e = arg;
          char pid[32]; snprintf(pid, sizeof pid, "%d", (int)getpid());
          /* Up to a minute: the attacker may start late on a loaded machine. */
          for (int i = 0; i < 1200 && !served; i++) { e->publish("victim.pid", pid, strlen(pid)); usleep(50000); }
          return NULL;
        }
        """)
  }

  /// A listening unix socket file and a loopback TCP listener, owned by the test.
  final class Listeners {
    let unixFD: Int32
    let tcpFD: Int32
    let port: UInt16

    init(unixPath: String) throws {
      let u = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
      var a = sockaddr_un()
      a.sun_family = sa_family_t(AF_UNIX)
      withUnsafeMutableBytes(of: &a.sun_path) { raw in
        for (i, b) in unixPath.utf8.prefix(raw.count - 1).enumerated() { raw[i] = b }
      }
      let bound = withUnsafePointer(to: &a) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          bind(u, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
      }
      guard bound == 0, listen(u, 4) == 0 else { throw HostileHostError.setup("unix listener: \(errno)") }
      chmod(unixPath, 0o777)
      let tcp = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
      var t = sockaddr_in()
      t.sin_family = sa_family_t(AF_INET)
      t.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
      let tcpBound = withUnsafePointer(to: &t) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          bind(tcp, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
      }
      var len = socklen_t(MemoryLayout<sockaddr_in>.size)
      _ = withUnsafeMutablePointer(to: &t) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(tcp, $0, &len) }
      }
      guard tcpBound == 0, listen(tcp, 4) == 0 else { throw HostileHostError.setup("tcp listener: \(errno)") }
      unixFD = u
      tcpFD = tcp
      port = UInt16(bigEndian: t.sin_port)
    }

    deinit {
      close(unixFD)
      close(tcpFD)
    }
  }

  @Test(arguments: HostileHost.Identity.allCases)
  func hostileModulesAreRefusedAndTheHealthyOneIsServed(as identity: HostileHost.Identity) throws {
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    let unixPath = h.dir.url("outside.sock")
    let listeners = try Listeners(unixPath: unixPath)
    let done = h.sandbox("com.hostile.pids") + "/attacks-done"
    let outside = try h.dir.write("outside.txt", "the test's")
    chmod(outside, 0o644)
    try h.install(
      Self.machine(
        sandbox: h.sandbox("com.hostile.machine"), outside: outside,
        library: h.dir.url("plugins/machine_entry.so")))
    try h.install(Self.pids(done: done))
    try h.install(
      Self.sockets("com.hostile.offline", "offline_entry", unixPath: unixPath, tcpPort: listeners.port))
    try h.install(
      Self.sockets("com.hostile.online", "online_entry", unixPath: unixPath, tcpPort: listeners.port),
      capabilities: ["networking"])
    try h.install(Self.victim)

    let clockBefore = time(nil)
    let hostnameBefore = ProcessInfo.processInfo.hostName
    let mine = ProcessFacts.of(getpid())
    let run = try h.run(
      for: 4, ready: { FileManager.default.fileExists(atPath: done) }, observe: ProcessFacts.of)

    #expect(run.status == 0, "\(run.output)")
    #expect(run.output.contains("5 modules: 5 ran and stopped cleanly"), "\(run.output)")
    // Every worker says what confined it.
    #expect(run.output.contains("capabilities dropped"), "\(run.output)")

    let machine = run.lines("com.hostile.machine")
    for attack in [
      "settimeofday", "clock_settime", "sethostname", "syslog read", "open /dev/kmsg", "mknodat 1:1",
      "mknodat 1:11",
      "open mknod'ed kmsg", "chmod of a file outside the sandbox",
      "fchmod of its own library", "fsetxattr of its own library", "chattr of its own library",
      "chown of a file outside the sandbox",
    ] {
      #expect(machine.contains { $0.hasPrefix("attack \(attack): refused") }, "\(attack): \(machine)")
    }
    // Memory no address-space limit sees: held by the worker's cgroup where the host has one
    // (a root host here), refused where it has none (an unprivileged host here).
    let cgroups = !run.output.contains("cgroups: NO cgroup")
    #expect(cgroups == (identity == .current && geteuid() == 0), "\(run.output)")
    for attack in ["memfd_create", "shmget"] {
      #expect(
        machine.contains { $0.hasPrefix("attack \(attack): refused") } == !cgroups, "\(attack): \(machine)")
    }
    // Refused by the policy, not by the kernel for a malformed call.
    for attack in [
      "fchmodat2 of a file outside the sandbox", "setxattrat of a file outside the sandbox",
      "file_setattr of a file outside the sandbox",
    ] {
      #expect(
        machine.contains("attack \(attack): refused (Operation not permitted)"), "\(attack): \(machine)")
    }
    #expect(!machine.contains { $0.contains("write") }, "\(machine)")
    // FIFOs are no device: still allowed, so the refusals above are not of everything.
    #expect(machine.contains("attack mkfifo in the sandbox: succeeded"), "\(machine)")

    let pids = run.lines("com.hostile.pids")
    for target in ["of the host", "of another worker"] {
      for attack in [
        "setpriority", "sched_setaffinity", "prlimit NOFILE", "prlimit CPU", "kill SIGCONT", "pidfd_open",
      ] {
        #expect(
          pids.contains { $0.hasPrefix("attack \(attack) \(target): refused") },
          "\(attack) \(target): \(pids)")
      }
    }
    #expect(pids.contains { $0.hasPrefix("attack open /proc to find other pids: refused") }, "\(pids)")
    #expect(pids.contains { $0.hasPrefix("attack kill of the host with high bits set: refused") }, "\(pids)")
    for owner in ["F_SETOWN", "F_SETOWN_EX", "FIOSETOWN"] {
      #expect(pids.contains { $0.hasPrefix("attack \(owner) to the host: refused") }, "\(pids)")
    }
    #expect(pids.contains("attack F_SETOWN to itself: succeeded"), "\(pids)")
    #if arch(x86_64)
      #expect(
        pids.contains { $0.hasPrefix("attack kill of the host through the i386 ABI: refused") }, "\(pids)")
    #endif
    #expect(pids.contains { $0.hasPrefix("attack setpriority of the host's group: refused") }, "\(pids)")
    #expect(pids.contains { $0.hasPrefix("attack kill SIGCONT of the host's group: refused") }, "\(pids)")
    // The same calls on itself still work: the filter tells the worker from everyone else.
    for own in ["setpriority of itself", "prlimit of itself", "kill SIGCONT of itself"] {
      #expect(pids.contains("attack \(own): succeeded"), "\(own): \(pids)")
    }

    for id in ["com.hostile.offline", "com.hostile.online"] {
      let lines = run.lines(id)
      for attack in ["AF_PACKET socket", "raw IP socket", "AF_NETLINK socket", "AF_UNIX socket"] {
        #expect(lines.contains { $0.hasPrefix("attack \(attack): refused") }, "\(id) \(attack): \(lines)")
      }
      #expect(
        !lines.contains { $0.contains("netlink route dump") || $0.contains("unix socket outside") },
        "\(lines)")
      #expect(lines.contains("attack AF_UNIX socketpair: succeeded"), "\(id): \(lines)")
    }
    #expect(run.lines("com.hostile.offline").contains { $0.hasPrefix("attack TCP socket: refused") })
    #expect(
      run.lines("com.hostile.online").contains("attack TCP connect to loopback: succeeded"), "\(run.output)")

    // The healthy module was served after every attack.
    #expect(
      run.lines("com.healthy.victim").contains("served after the attacks of com.hostile.pids"),
      "\(run.output)")

    // The host, seen from outside after the attacks, is as it started: nice, CPUs, limits.
    let host = try #require(run.observed, "the attacks never finished: \(run.output)")
    #expect(host["nice"] == mine["nice"], "host \(host) vs test \(mine)")
    #expect(host["cpus"] == mine["cpus"], "host \(host) vs test \(mine)")
    #expect(host["cpuSeconds"] == mine["cpuSeconds"], "host \(host) vs test \(mine)")
    #expect(host["openFiles"] != nil && host["openFiles"] != "10", "host \(host)")
    let mode = try FileManager.default.attributesOfItem(atPath: outside)[.posixPermissions] as? Int
    #expect(mode == 0o644)
    // And the machine: its clock did not jump, its name did not change.
    #expect(abs(time(nil) - clockBefore) < 60)
    #expect(ProcessInfo.processInfo.hostName == hostnameBefore)
    withExtendedLifetime(listeners) {}
  }

  @Test(arguments: HostileHost.Identity.allCases)
  func everyWorkerSaysHowItIsConfined(as identity: HostileHost.Identity) throws {
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    try h.install(ModuleFixture(moduleID: "com.test.plain", entryPoint: "plain_entry"))
    try h.install(
      ModuleFixture(moduleID: "com.test.online", entryPoint: "online_entry"), capabilities: ["networking"])
    let run = try h.run(for: 0, extraArguments: ["--json"])
    #expect(run.status == 0, "\(run.output)")
    let modules = try #require(try JSONParser.parse(run.stdout).objectValue?["modules"]?.arrayValue)
    var loads: [String: String] = [:]
    for case .object(let m) in modules {
      let load = m["trace"]?.arrayValue?.compactMap(\.objectValue).first { $0["step"]?.stringValue == "load" }
      loads[m["moduleID"]?.stringValue ?? ""] = load?["detail"]?.stringValue
    }
    let plain = try #require(loads["com.test.plain"], "\(run.stdout)")
    let online = try #require(loads["com.test.online"], "\(run.stdout)")
    // Where the host has cgroups (root here) they count memfds; where it has none, memfds are refused.
    let memory =
      run.output.contains("cgroups: NO cgroup") ? "memfd/shm refused" : "memory counted by its cgroup"
    for part in ["capabilities dropped", "seccomp deny-list (", memory, "landlock ABI"] {
      #expect(plain.contains(part), "\(plain)")
      #expect(online.contains(part), "\(online)")
    }
    // Here the kernel gives the namespaces to root and to an unprivileged user alike (a network
    // namespace is on request only: the filter refuses socket() without networking).
    // And a mount namespace, for the tmpfs at its TMPDIR (issue 40: --tmpdir-size, 256 MiB).
    #expect(plain.contains("user+ipc+uts+mount namespaces"), "\(plain)")
    #expect(online.contains("user+ipc+uts+mount namespaces"), "\(online)")
    #expect(plain.contains("TMPDIR a tmpfs of 256 MiB"), "\(plain)")
    #expect(!plain.contains("missing"), "\(plain)")
  }
  /// Root on the host is nobody in the worker: no capability in any set, as the kernel reports
  /// them to the module itself (capget, and prctl for the bounding and ambient sets).
  @Test(arguments: HostileHost.Identity.allCases)
  func theWorkerHoldsNoCapability(as identity: HostileHost.Identity) throws {
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    var f = ModuleFixture(moduleID: "com.hostile.caps", entryPoint: "caps_entry")
    f.prelude = """
      #include <linux/capability.h>
      #include <sys/prctl.h>
      #include <sys/syscall.h>
      """
    f.start = """
      struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
      struct __user_cap_data_struct d[2];
      memset(d, 0xFF, sizeof d);
      long got = syscall(SYS_capget, &hdr, d);
      int bounding = 0, ambient = 0;
      for (int c = 0; c < 64; c++) {
        if (prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1) bounding++;
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, c, 0, 0) == 1) ambient++;
      }
      char line[200];
      snprintf(line, sizeof line, "caps: capget %ld, effective %x %x, permitted %x %x, inheritable %x %x, bounding %d, ambient %d",
        got, d[0].effective, d[1].effective, d[0].permitted, d[1].permitted, d[0].inheritable, d[1].inheritable,
        bounding, ambient);
      fixture_log(line);
      return FORSETTI_OK;
      """
    try h.install(f)
    let run = try h.run(for: 0)
    #expect(run.status == 0, "\(run.output)")
    #expect(
      run.lines("com.hostile.caps").contains(
        "caps: capget 0, effective 0 0, permitted 0 0, inheritable 0 0, bounding 0, ambient 0"),
      "\(run.lines("com.hostile.caps"))")
  }
}
