import ForsettiTestSupport
import Foundation
import Synchronization
import Testing

@testable import ForsettiRuntime

/// A cgroup per worker holds memory of every kind (memfd included) and tasks: on this machine's
/// real cgroups, on a temporary tree playing cgroup v2 (and v1) by the kernel's rules, and in the
/// detection of what a system has.
@Suite(.onTestThreads, .serialized) struct WorkerCgroupTests {
  // MARK: - Real cgroups (v1 here; v2 where the machine has it)

  /// A process added to a 256 MiB cgroup before it starts writing 1 GiB into memfds is killed
  /// by the kernel, and the kill is reported; the same program outside writes 384 MiB unharmed.
  /// A process creating threads is stopped at the task limit with EAGAIN. Release removes all.
  @Test func realCgroupHoldsMemfdWritesAndThreads() throws {
    let cgroups: WorkerCgroups
    do {
      // The process's own preparation, shared with every isolated module of the other tests:
      // a second one would own the same forsetti-<pid> and could remove it under them.
      cgroups = try HostCgroups.workerCgroups.get()
    } catch {
      // Skip nothing silently: without root or delegation the typed error must say why.
      #expect(geteuid() != 0, "as root the host must be able to make cgroups here: \(error)")
      // Every reason the host cannot have cgroups reads "no … cgroup: why".
      #expect(error.description.hasPrefix("no ") && error.description.contains("cgroup"), "\(error)")
      print("WorkerCgroupTests: no real cgroup test on this machine, only its typed error: \(error)")
      return
    }
    let programs = TemporaryDirectory("cgroup-programs")
    let hog = try compile("memfd_hog", Self.memfdHog, in: programs)
    let spawner = try compile("thread_spawner", Self.threadSpawner, in: programs)
    let limit = 256 << 20
    // Not closed here: forsetti-<pid> belongs to the whole process (the temporary-tree tests
    // check close()).

    let held = try cgroups.create(
      moduleID: "com.test.memfd hog", limits: .init(memoryBytes: UInt64(limit), tasks: 16))
    defer { try? held.release() }
    let inside = try Started(hog, ["1024"])
    let outside = try Started(hog, ["384"])
    try held.add(pid: inside.process.processIdentifier)
    #expect(held.processes() == [inside.process.processIdentifier])
    inside.go()
    outside.go()
    inside.process.waitUntilExit()
    outside.process.waitUntilExit()
    #expect(
      inside.process.terminationReason == .uncaughtSignal && inside.process.terminationStatus == SIGKILL,
      "inside: \(inside.process.terminationReason) \(inside.process.terminationStatus) \(inside.output())")
    #expect(
      outside.process.terminationStatus == 0 && outside.output().contains("done 384 MiB"),
      "\(outside.output())")
    let facts = held.facts()
    #expect(facts.wasOOMKilled, "\(facts)")
    #expect(facts.peakBytes.map { $0 <= UInt64(limit) && $0 >= UInt64(limit / 2) } == true, "\(facts)")
    #expect(facts.summary.contains("killed by the kernel at its memory limit"), "\(facts.summary)")
    let heldDirectories = held.directories
    try held.release()
    for d in heldDirectories { #expect(!FileManager.default.fileExists(atPath: d), "\(d) left behind") }

    let tasks = try cgroups.create(
      moduleID: "com.test.threads", limits: .init(memoryBytes: UInt64(limit), tasks: 16))
    defer { try? tasks.release() }
    let threads = try Started(spawner, ["200"])
    let free = try Started(spawner, ["100"])
    try tasks.add(pid: threads.process.processIdentifier)
    threads.go()
    free.go()
    // The main thread is one of the 16 tasks.
    #expect(threads.line() == "15 EAGAIN")
    #expect(free.line() == "100 ok")
    free.finish()
    free.process.waitUntilExit()
    #expect(tasks.facts().taskLimitHits.map { $0 >= 1 } == true, "\(tasks.facts())")
    // Still waiting on its stdin: release must kill it before removing the cgroup.
    let taskDirectories = tasks.directories
    try tasks.release()
    threads.process.waitUntilExit()
    #expect(
      threads.process.terminationReason == .uncaughtSignal && threads.process.terminationStatus == SIGKILL)
    for d in taskDirectories { #expect(!FileManager.default.fileExists(atPath: d), "\(d) left behind") }
  }

  struct CompileFailed: Error { var output: String }

  /// A C program under test: started, told to go on its stdin once it is in its cgroup.
  final class Started {
    let process = Process()
    private let input = Pipe()
    private let out = Pipe()

    init(_ executable: String, _ arguments: [String]) throws {
      process.executableURL = URL(fileURLWithPath: executable)
      process.arguments = arguments
      process.standardInput = input
      process.standardOutput = out
      process.standardError = out
      try process.run()
    }

    func go() { input.fileHandleForWriting.write(Data("g".utf8)) }
    func finish() { try? input.fileHandleForWriting.close() }

    /// The first line the program prints.
    func line() -> String {
      var bytes = Data()
      while !bytes.contains(UInt8(ascii: "\n")) {
        let more = out.fileHandleForReading.availableData
        if more.isEmpty { break }
        bytes.append(more)
      }
      return String(decoding: bytes, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""
    }

    func output() -> String {
      String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }
  }

  private func compile(_ name: String, _ source: String, in dir: TemporaryDirectory) throws -> String {
    let src = try dir.write("\(name).c", source)
    let exe = dir.url(name)
    let r = try ProcessRunner.run("/usr/bin/env", ["cc", "-O1", "-pthread", "-o", exe, src])
    guard r.status == 0 else { throw CompileFailed(output: r.stderr) }
    return exe
  }

  /// Waits for a byte on stdin, then writes argv[1] MiB into memfds (64 MiB each, all kept open)
  /// with write(2): memory no address-space limit sees.
  static let memfdHog = """
    #define _GNU_SOURCE
    #include <errno.h>
    #include <stdio.h>
    #include <stdlib.h>
    #include <string.h>
    #include <sys/mman.h>
    #include <unistd.h>
    int main(int argc, char **argv) {
      long mib = atol(argv[1]);
      char go;
      if (read(0, &go, 1) != 1) return 2;
      static char chunk[1 << 20];
      memset(chunk, 'x', sizeof chunk);
      int fd = -1;
      for (long i = 0; i < mib; i++) {
        if (i % 64 == 0 && (fd = memfd_create("hog", 0)) < 0) { printf("memfd_create: %d\\n", errno); return 3; }
        if (write(fd, chunk, sizeof chunk) != (ssize_t)sizeof chunk) {
          printf("write failed (%d) after %ld MiB\\n", errno, i);
          return 4;
        }
      }
      printf("done %ld MiB\\n", mib);
      return 0;
    }
    """

  /// Waits for a byte on stdin, creates up to argv[1] idle threads, prints how many and why it
  /// stopped, then waits for stdin to close.
  static let threadSpawner = """
    #include <errno.h>
    #include <pthread.h>
    #include <stdio.h>
    #include <stdlib.h>
    #include <string.h>
    #include <unistd.h>
    static void *idle(void *arg) { (void)arg; for (;;) pause(); return NULL; }
    int main(int argc, char **argv) {
      int cap = atoi(argv[1]);
      char go;
      if (read(0, &go, 1) != 1) return 2;
      pthread_attr_t attr;
      pthread_attr_init(&attr);
      pthread_attr_setstacksize(&attr, 64 * 1024);
      int n = 0, err = 0;
      for (; n < cap; n++) {
        pthread_t t;
        if ((err = pthread_create(&t, &attr, idle, NULL)) != 0) break;
      }
      printf("%d %s\\n", n, err == 0 ? "ok" : err == EAGAIN ? "EAGAIN" : strerror(err));
      fflush(stdout);
      while (read(0, &go, 1) > 0) {}
      return 0;
    }
    """

  // MARK: - cgroup v2 on a temporary tree

  /// The host in the root cgroup (exempt from the no-internal-processes rule): controllers are
  /// enabled where it is, the worker's files get the limits, add moves the pid, and release kills
  /// through cgroup.kill and removes everything.
  @Test func v2InTheRootCgroup() throws {
    let fs = try FakeCgroupFS.v2(hostCgroup: "/", offered: "cpu io memory pids", hostProcesses: [100])
    let cgroups = try WorkerCgroups.prepare(files: fs, hostPID: 100)
    #expect(try fs.text("cgroup.subtree_control") == "cpu memory pids")
    #expect(try fs.text("forsetti-100/cgroup.subtree_control") == "cpu memory pids")
    #expect(!fs.has("forsetti-host"))
    #expect(cgroups.summary == "cgroup v2: memory,pids,cpu in \(fs.mount)/forsetti-100")
    #expect(cgroups.hasCPU && cgroups.notes.isEmpty, "\(cgroups.notes)")

    let worker = try cgroups.create(
      moduleID: "com.example/../counter", limits: .init(memoryBytes: 256 << 20, tasks: 64))
    let leaf = "forsetti-100/com.example_.._counter-1"
    #expect(worker.directories == [fs.mount + "/" + leaf])
    #expect(try fs.text(leaf + "/memory.max") == "268435456")
    #expect(try fs.text(leaf + "/memory.swap.max") == "0")
    #expect(try fs.text(leaf + "/memory.oom.group") == "1")
    #expect(try fs.text(leaf + "/pids.max") == "64")
    #expect(try fs.text(leaf + "/cpu.weight") == "100")
    #expect(try fs.text(leaf + "/cpu.max") == "max 100000")

    fs.spawn(200, in: "")
    try worker.add(pid: 200)
    #expect(try fs.text(leaf + "/cgroup.procs") == "200")
    // The host runs beside its workers for the cpu controller, at a module's weight.
    #expect(try fs.text("forsetti-100/forsetti-host/cgroup.procs") == "100")
    #expect(try fs.text("forsetti-100/forsetti-host/cpu.weight") == "100")
    try fs.put(leaf + "/memory.events", "low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\noom_group_kill 1\n")
    try fs.put(leaf + "/memory.peak", "268435456\n")
    try fs.put(leaf + "/memory.max", "268435456\n")
    let facts = worker.facts()
    #expect(facts.wasOOMKilled && facts.memoryLimitHits == 7 && facts.peakBytes == 268_435_456)
    #expect(facts.summary == "killed by the kernel at its memory limit (peak 256.0 MiB of 256.0 MiB)")

    try worker.release()
    #expect(fs.killedThroughCgroupKill == [200])
    #expect(!fs.has(leaf))
    #expect(throws: CgroupError.released(directory: fs.mount + "/" + leaf)) { try worker.add(pid: 300) }
    cgroups.close()
    #expect(!fs.has("forsetti-100"))
  }

  /// A delegated service cgroup that holds the host's processes cannot enable controllers for
  /// children: they move into `forsetti-host` first, as systemd's delegation guide advises.
  @Test func v2DelegatedCgroupWithProcessesGetsAHostLeaf() throws {
    let service = "system.slice/forsetti.service"
    let fs = try FakeCgroupFS.v2(
      hostCgroup: "/" + service, offered: "memory pids", hostProcesses: [100, 101])
    fs.describe(100, parent: 1, name: "forsetti-host")
    fs.describe(101, parent: 100, name: "forsetti-worker")
    let cgroups = try WorkerCgroups.prepare(files: fs, hostPID: 100)
    #expect(try fs.text(service + "/cgroup.procs") == "")
    #expect(try fs.text(service + "/forsetti-host/cgroup.procs") == "100\n101")
    #expect(try fs.text(service + "/cgroup.subtree_control") == "memory pids")
    #expect(cgroups.notes.contains { $0.contains("moved 2 process(es)") && $0.contains("forsetti-host") })
    let worker = try cgroups.create(moduleID: "com.example.counter", limits: .init(memoryBytes: 1 << 30))
    #expect(try fs.text(service + "/forsetti-100/com.example.counter-1/memory.max") == "1073741824")
    let tasks = try fs.text(service + "/forsetti-100/com.example.counter-1/pids.max")
    #expect(tasks == String(WorkerCgroup.Limits.defaultTasks))
    try worker.release()
    // Prepared again (the host now in its leaf): the workers' cgroups stay beside the leaf.
    fs.proc["/proc/self/cgroup"] = "0::/\(service)/forsetti-host\n"
    let again = try WorkerCgroups.prepare(files: fs, hostPID: 100)
    #expect(again.parentDirectories == [fs.mount + "/" + service + "/forsetti-100"])
    #expect(!fs.has(service + "/forsetti-host/forsetti-host"))
  }

  /// Without the controllers delegated, or when the host cannot be moved, the error says why.
  @Test func v2RefusalsSayWhy() throws {
    let bare = try FakeCgroupFS.v2(
      hostCgroup: "/user.slice/session-2.scope", offered: "cpu io", hostProcesses: [100])
    #expect(
      throws: CgroupError.notDelegated(
        .memory, directory: bare.mount + "/user.slice/session-2.scope", available: "cpu io")
    ) {
      try WorkerCgroups.prepare(files: bare, hostPID: 100)
    }
    let text = CgroupError.notDelegated(.memory, directory: "/x", available: "cpu io").description
    #expect(text.contains("lists only 'cpu io'") && text.contains("Delegate=yes"))

    let stuck = try FakeCgroupFS.v2(
      hostCgroup: "/app.scope", offered: "memory pids", hostProcesses: [100, 101])
    stuck.unmovable(101)
    stuck.describe(101, parent: 100, name: "cc")
    #expect(throws: CgroupError.hostNotMovable(directory: stuck.mount + "/app.scope", pid: 101, code: EPERM))
    {
      try WorkerCgroups.prepare(files: stuck, hostPID: 100)
    }
  }

  /// A cgroup the host shares with processes it did not start (a login session's scope) is not
  /// rearranged: the error says which process and what to do instead.
  @Test func v2SharedCgroupIsLeftAlone() throws {
    let fs = try FakeCgroupFS.v2(
      hostCgroup: "/user.slice/session-1.scope", offered: "memory pids", hostProcesses: [50, 100])
    fs.describe(50, parent: 1, name: "bash")
    fs.describe(100, parent: 50, name: "forsetti-host")
    let directory = fs.mount + "/user.slice/session-1.scope"
    #expect(throws: CgroupError.sharedCgroup(directory: directory, pid: 50, name: "bash")) {
      try WorkerCgroups.prepare(files: fs, hostPID: 100)
    }
    #expect(try fs.text("user.slice/session-1.scope/cgroup.procs") == "50\n100")
    let text = CgroupError.sharedCgroup(directory: directory, pid: 50, name: "bash").description
    #expect(text.contains("also holds pid 50 (bash)") && text.contains("Delegate=yes"))
  }

  /// `forsetti-<pid>` left by a host that died is emptied and removed at start; one whose host
  /// still runs is left alone.
  @Test func staleCgroupsOfDeadHostsAreRemoved() throws {
    let fs = try FakeCgroupFS.v2(hostCgroup: "/", offered: "memory pids", hostProcesses: [100])
    try fs.write(fs.mount + "/cgroup.subtree_control", "+memory +pids")
    for dir in ["forsetti-999", "forsetti-777"] {
      try fs.makeDirectory(fs.mount + "/" + dir)
      try fs.write(fs.mount + "/\(dir)/cgroup.subtree_control", "+memory +pids")
      try fs.makeDirectory(fs.mount + "/\(dir)/com.example.counter-1")
    }
    fs.spawn(555, in: "forsetti-999/com.example.counter-1")
    fs.spawn(556, in: "forsetti-777/com.example.counter-1")
    fs.setAlive(777)
    let cgroups = try WorkerCgroups.prepare(files: fs, hostPID: 100)
    #expect(!fs.has("forsetti-999"))
    #expect(fs.killedThroughCgroupKill == [555])
    #expect(fs.has("forsetti-777/com.example.counter-1"))
    #expect(cgroups.notes.contains { $0.contains("forsetti-999") && $0.contains("no longer running") })
  }

  /// A host started from inside another host's `forsetti-host` leaf nests its `forsetti-<pid>`
  /// there. When both are gone, the nested one is removed first, so the outer one goes too; one
  /// whose host still runs keeps the leaf that holds it, without waiting on it.
  @Test func nestedStaleCgroupsAreRemovedDepthFirst() throws {
    let fs = try FakeCgroupFS.v2(hostCgroup: "/", offered: "memory pids", hostProcesses: [100])
    try fs.write(fs.mount + "/cgroup.subtree_control", "+memory +pids")
    for dir in [
      "forsetti-999", "forsetti-999/forsetti-host", "forsetti-999/forsetti-host/forsetti-888",
      "forsetti-999/forsetti-host/forsetti-888/forsetti-host", "forsetti-999/forsetti-host/forsetti-888/m-1",
      "forsetti-666", "forsetti-666/forsetti-host", "forsetti-666/forsetti-host/forsetti-777",
      "forsetti-666/forsetti-host/forsetti-777/m-1",
    ] {
      try fs.makeDirectory(fs.mount + "/" + dir)
    }
    fs.spawn(555, in: "forsetti-999/forsetti-host/forsetti-888/m-1")
    fs.setAlive(777)
    let cgroups = try WorkerCgroups.prepare(files: fs, hostPID: 100)
    #expect(!fs.has("forsetti-999"))
    #expect(fs.killedThroughCgroupKill == [555])
    #expect(
      cgroups.notes.contains { $0.hasSuffix("forsetti-999, left by host 999 which is no longer running") })
    #expect(fs.has("forsetti-666/forsetti-host/forsetti-777/m-1"))
    #expect(cgroups.notes.contains { $0.contains("could not remove") && $0.contains("forsetti-666") })
    #expect(fs.pauses == 0)
  }

  // MARK: - cgroup v1 on a temporary tree

  /// v1: memory and pids each in their hierarchy; with swap accounting, memory plus swap is held
  /// to the same limit (no swap at all); without it and with swap on, swappiness 0 and a note.
  @Test func v1LimitsLeaveSwapNoEscape() throws {
    let counted = try FakeCgroupFS.v1(memoryCgroup: "/process_api/abc", memsw: true, swapOn: true)
    let cgroups = try WorkerCgroups.prepare(files: counted, hostPID: 100)
    #expect(
      cgroups.summary
        == "cgroup v1: memory in \(counted.root)/memory/process_api/abc/forsetti-100; pids in \(counted.root)/pids/forsetti-100; cpu in \(counted.root)/cpu/forsetti-100"
    )
    let w = try cgroups.create(moduleID: "m", limits: .init(memoryBytes: 1 << 30, tasks: 32))
    let leaf = "memory/process_api/abc/forsetti-100/m-1"
    #expect(try counted.text(leaf + "/memory.limit_in_bytes", underRoot: true) == "1073741824")
    #expect(try counted.text(leaf + "/memory.memsw.limit_in_bytes", underRoot: true) == "1073741824")
    #expect(try counted.text(leaf + "/memory.swappiness", underRoot: true) == "60")
    #expect(try counted.text("pids/forsetti-100/m-1/pids.max", underRoot: true) == "32")
    #expect(cgroups.notes.isEmpty)
    counted.spawn(300, in: leaf, underRoot: true)
    try w.release()
    #expect(counted.killedOneByOne == [300])
    #expect(!counted.has(leaf, underRoot: true))

    let uncounted = try FakeCgroupFS.v1(memoryCgroup: "/", memsw: false, swapOn: true)
    let other = try WorkerCgroups.prepare(files: uncounted, hostPID: 100)
    _ = try other.create(moduleID: "m", limits: .init(memoryBytes: 1 << 30))
    #expect(try uncounted.text("memory/forsetti-100/m-1/memory.swappiness", underRoot: true) == "0")
    #expect(other.notes.contains { $0.contains("swap is on") && $0.contains("swapaccount=1") })
  }

  /// Not root and no delegation: the error names the directory and its owner and what to do.
  @Test func v1NotWritableSaysWhoOwnsIt() throws {
    let fs = try FakeCgroupFS.v1(memoryCgroup: "/user.slice", memsw: true, swapOn: false)
    fs.refuseDirectories()
    let expected = CgroupError.notWritable(
      .memory, directory: fs.root + "/memory/user.slice", owner: 0, code: EACCES)
    #expect(throws: expected) { try WorkerCgroups.prepare(files: fs, hostPID: 100) }
    #expect(
      expected.description.hasPrefix(
        "no writable memory cgroup: \(fs.root)/memory/user.slice is owned by root"))
    #expect(expected.description.contains("run as root or under systemd with Delegate=yes"))
  }

  // MARK: - The cpu controller

  /// v1 with cpu mounted alone and co-mounted with cpuacct: the workers' parent has the standard
  /// shares, each worker the shares of its weight (systemd's mapping, 100 = 1024) and a CFS quota
  /// for its ceiling (none: -1).
  @Test(arguments: ["cpu", "cpu,cpuacct"])
  func v1CPUSharesAndQuota(mount: String) throws {
    let fs = try FakeCgroupFS.v1(memoryCgroup: "/", memsw: true, swapOn: false, cpu: mount)
    let cgroups = try WorkerCgroups.prepare(files: fs, hostPID: 100)
    #expect(cgroups.hasCPU && cgroups.notes.isEmpty, "\(cgroups.notes)")
    #expect(cgroups.summary.hasSuffix("; cpu in \(fs.root)/\(mount)/forsetti-100"), "\(cgroups.summary)")
    #expect(try fs.text("\(mount)/forsetti-100/cpu.shares", underRoot: true) == "1024")
    let heavy = try cgroups.create(
      moduleID: "com.test.heavy", limits: .init(memoryBytes: 1 << 30, cpuWeight: 300, cpuMaxPercent: 150))
    let leaf = "\(mount)/forsetti-100/com.test.heavy-1"
    #expect(heavy.directories.contains(fs.root + "/" + leaf))
    #expect(try fs.text(leaf + "/cpu.shares", underRoot: true) == "3072")
    #expect(try fs.text(leaf + "/cpu.cfs_period_us", underRoot: true) == "100000")
    #expect(try fs.text(leaf + "/cpu.cfs_quota_us", underRoot: true) == "150000")
    // memory and pids exactly as without cpu.
    #expect(
      try fs.text("memory/forsetti-100/com.test.heavy-1/memory.limit_in_bytes", underRoot: true)
        == "1073741824")
    #expect(try fs.text("pids/forsetti-100/com.test.heavy-1/pids.max", underRoot: true) == "128")
    _ = try cgroups.create(moduleID: "com.test.plain", limits: .init(memoryBytes: 1 << 30))
    #expect(try fs.text("\(mount)/forsetti-100/com.test.plain-2/cpu.shares", underRoot: true) == "1024")
    #expect(try fs.text("\(mount)/forsetti-100/com.test.plain-2/cpu.cfs_quota_us", underRoot: true) == "-1")
    // The smallest and largest weights map as systemd maps them.
    #expect(CPUShares.v1Shares(weight: 1) == 10 && CPUShares.v1Shares(weight: 10_000) == 102_400)
    fs.spawn(300, in: leaf, underRoot: true)
    try heavy.release()
    #expect(fs.killedOneByOne == [300] && !fs.has(leaf, underRoot: true))
  }

  /// v2: cpu enabled beside memory and pids; the host's processes move into `forsetti-host`, a
  /// sibling of `forsetti-100` with the same weight, so the host is never behind its modules;
  /// each worker gets `cpu.weight` and `cpu.max` as "QUOTA PERIOD". A spare's cgroup gets its
  /// module's share when it is given one.
  @Test func v2CPUWeightAndCeiling() throws {
    let service = "system.slice/forsetti.service"
    let fs = try FakeCgroupFS.v2(hostCgroup: "/" + service, offered: "cpu memory pids", hostProcesses: [100])
    fs.describe(100, parent: 1, name: "forsetti-host")
    let cgroups = try WorkerCgroups.prepare(files: fs, hostPID: 100)
    #expect(try fs.text(service + "/cgroup.subtree_control") == "cpu memory pids")
    #expect(try fs.text(service + "/forsetti-100/cgroup.subtree_control") == "cpu memory pids")
    // Moved out of the service's cgroup into a leaf (no internal processes), then beside its
    // workers for the cpu controller, at a module's weight.
    #expect(try fs.text(service + "/forsetti-100/forsetti-host/cgroup.procs") == "100")
    #expect(try fs.text(service + "/forsetti-100/forsetti-host/cpu.weight") == "100")
    #expect(try fs.text(service + "/forsetti-host/cpu.weight") == "100")
    #expect(try fs.text(service + "/forsetti-100/cpu.weight") == "100")
    #expect(cgroups.hasCPU && cgroups.notes.count == 1 && cgroups.notes[0].contains("moved 1 process(es)"))
    let w = try cgroups.create(
      moduleID: "com.test.capped", limits: .init(memoryBytes: 1 << 30, cpuWeight: 250, cpuMaxPercent: 50))
    #expect(try fs.text(service + "/forsetti-100/com.test.capped-1/cpu.weight") == "250")
    #expect(try fs.text(service + "/forsetti-100/com.test.capped-1/cpu.max") == "50000 100000")
    #expect(try fs.text(service + "/forsetti-100/com.test.capped-1/memory.max") == "1073741824")
    try w.release()
    let spare = try cgroups.create(moduleID: "spare", limits: .init(memoryBytes: 1 << 30))
    #expect(try fs.text(service + "/forsetti-100/spare-2/cpu.weight") == "100")
    try spare.setCPU(weight: 40, maxPercent: 200)
    #expect(try fs.text(service + "/forsetti-100/spare-2/cpu.weight") == "40")
    #expect(try fs.text(service + "/forsetti-100/spare-2/cpu.max") == "200000 100000")
    try spare.setCPU(weight: 100, maxPercent: nil)
    #expect(try fs.text(service + "/forsetti-100/spare-2/cpu.max") == "max 100000")
    // Prepared again with the host in its cpu leaf: the workers stay in the same parent, never
    // beneath the host's leaf; at close the host goes back beside it and both leave.
    fs.proc["/proc/self/cgroup"] = "0::/\(service)/forsetti-100/forsetti-host\n"
    let again = try WorkerCgroups.prepare(files: fs, hostPID: 100)
    #expect(again.parentDirectories == [fs.mount + "/" + service + "/forsetti-100"])
    #expect(!fs.has(service + "/forsetti-100/forsetti-host/forsetti-100"))
    try spare.release()
    cgroups.close()
    #expect(try fs.text(service + "/forsetti-host/cgroup.procs") == "100")
    #expect(!fs.has(service + "/forsetti-100"))
  }

  /// Hybrid: cpu bound to a v1 hierarchy is used there; cpu not bound to v1 is looked for in the
  /// unified tree, used there when offered, and done without (one note) when not.
  @Test func hybridCPUInV1OrInTheUnifiedTree() throws {
    let bound = try FakeCgroupFS.v1(memoryCgroup: "/", memsw: true, swapOn: false, unified: "")
    let inV1 = try WorkerCgroups.prepare(files: bound, hostPID: 100)
    #expect(inV1.hasCPU && inV1.notes.isEmpty && inV1.summary.hasPrefix("cgroup v1:"), "\(inV1.summary)")
    _ = try inV1.create(moduleID: "m", limits: .init(memoryBytes: 1 << 30, cpuWeight: 50))
    #expect(try bound.text("cpu/forsetti-100/m-1/cpu.shares", underRoot: true) == "512")

    let unified = try FakeCgroupFS.v1(
      memoryCgroup: "/", memsw: true, swapOn: false, unified: "cpu", cpuBound: false)
    let inV2 = try WorkerCgroups.prepare(files: unified, hostPID: 100)
    #expect(inV2.hasCPU && inV2.notes.isEmpty, "\(inV2.notes)")
    #expect(
      inV2.summary
        == "cgroup v1+v2: memory in \(unified.root)/memory/forsetti-100; pids in \(unified.root)/pids/forsetti-100; cpu in \(unified.mount)/forsetti-100"
    )
    _ = try inV2.create(moduleID: "m", limits: .init(memoryBytes: 1 << 30, cpuWeight: 50, cpuMaxPercent: 25))
    #expect(try unified.text("forsetti-100/m-1/cpu.weight") == "50")
    #expect(try unified.text("forsetti-100/m-1/cpu.max") == "25000 100000")
    #expect(
      try unified.text("memory/forsetti-100/m-1/memory.limit_in_bytes", underRoot: true) == "1073741824")

    let bare = try FakeCgroupFS.v1(
      memoryCgroup: "/", memsw: true, swapOn: false, unified: "", cpuBound: false)
    let without = try WorkerCgroups.prepare(files: bare, hostPID: 100)
    #expect(!without.hasCPU && without.notes.count == 1, "\(without.notes)")
    #expect(without.notes[0].hasPrefix("no cpu cgroup: \(bare.mount)/cgroup.controllers lists nothing"))
    #expect(without.notes[0].contains("--cpu-weight and --cpu-max are not applied"))
  }

  /// Wherever the cpu controller cannot be had — not mounted, not delegated, not writable —
  /// workers get memory and pids exactly as before, and one note says why.
  @Test func missingCPULeavesMemoryAndPidsWithOneNote() throws {
    let unmounted = try FakeCgroupFS.v1(memoryCgroup: "/", memsw: true, swapOn: false, cpu: nil)
    let notWritable = try FakeCgroupFS.v1(memoryCgroup: "/", memsw: true, swapOn: false)
    notWritable.refuseDirectories(under: "cpu")
    let notDelegated = try FakeCgroupFS.v2(hostCgroup: "/", offered: "memory pids", hostProcesses: [100])
    try notDelegated.put("cgroup.controllers", "memory pids")
    let cases: [(FakeCgroupFS, String)] = [
      (unmounted, "no cpu cgroup: no cgroup v1 hierarchy has the cpu controller"),
      (notWritable, "no writable cpu cgroup: \(notWritable.root)/cpu is owned by root"),
      (notDelegated, "no cpu cgroup: \(notDelegated.mount)/cgroup.controllers lists only 'memory pids'"),
    ]
    for (fs, why) in cases {
      let cgroups = try WorkerCgroups.prepare(files: fs, hostPID: 100)
      #expect(!cgroups.hasCPU && !cgroups.summary.contains("cpu"), "\(cgroups.summary)")
      #expect(cgroups.notes.count == 1 && cgroups.notes[0].hasPrefix(why), "\(cgroups.notes)")
      let w = try cgroups.create(
        moduleID: "m", limits: .init(memoryBytes: 1 << 30, tasks: 32, cpuWeight: 500, cpuMaxPercent: 50))
      #expect(w.directories.count == (fs === notDelegated ? 1 : 2))
      let memory =
        fs === notDelegated ? "forsetti-100/m-1/memory.max" : "memory/forsetti-100/m-1/memory.limit_in_bytes"
      let pids = fs === notDelegated ? "forsetti-100/m-1/pids.max" : "pids/forsetti-100/m-1/pids.max"
      #expect(try fs.text(memory, underRoot: fs !== notDelegated) == "1073741824")
      #expect(try fs.text(pids, underRoot: fs !== notDelegated) == "32")
    }
    #expect(!notWritable.has("cpu/forsetti-100", underRoot: true))
  }

  // MARK: - Detection

  static let v1Mountinfo = """
    31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
    32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
    35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
    39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
    40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
    """

  @Test func detectsV1() {
    let h = CgroupHierarchy.detect(
      mountinfo: Self.v1Mountinfo,
      cgroup: "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/6543\n1:cpu,cpuacct:/\n")
    #expect(h.kind == .legacy)
    #expect(
      h.controllers[.memory]
        == .found(
          .init(
            version: .v1, mountPoint: "/sys/fs/cgroup/memory",
            directory: "/sys/fs/cgroup/memory/process_api/6543")))
    #expect(
      h.controllers[.pids]
        == .found(.init(version: .v1, mountPoint: "/sys/fs/cgroup/pids", directory: "/sys/fs/cgroup/pids")))
  }

  @Test func detectsV2() {
    let h = CgroupHierarchy.detect(
      mountinfo:
        "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n",
      cgroup: "0::/system.slice/forsetti.service\n")
    #expect(h.kind == .unified)
    let p = CgroupPlacement(
      version: .v2, mountPoint: "/sys/fs/cgroup", directory: "/sys/fs/cgroup/system.slice/forsetti.service")
    #expect(h.controllers[.memory] == .found(p) && h.controllers[.pids] == .found(p))
  }

  /// systemd's hybrid layout: memory and pids in v1 (the kernel keeps them out of the unified
  /// tree, which only tracks processes), a cgroup2 mount beside them.
  @Test func detectsHybridAndUsesV1ForBoundControllers() {
    let h = CgroupHierarchy.detect(
      mountinfo: Self.v1Mountinfo
        + "\n41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
      cgroup: "9:name=systemd:/x.service\n8:pids:/x.service\n4:memory:/x.service\n0::/x.service\n")
    #expect(h.kind == .hybrid)
    #expect(
      h.controllers[.memory]
        == .found(
          .init(
            version: .v1, mountPoint: "/sys/fs/cgroup/memory", directory: "/sys/fs/cgroup/memory/x.service")))
    // Hybrid with pids not bound to v1: it is looked for in the unified tree.
    let mixed = CgroupHierarchy.detect(
      mountinfo: Self.v1Mountinfo
        + "\n41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
      cgroup: "4:memory:/x.service\n0::/x.service\n")
    #expect(
      mixed.controllers[.pids]
        == .found(
          .init(
            version: .v2, mountPoint: "/sys/fs/cgroup/unified", directory: "/sys/fs/cgroup/unified/x.service")
        ))
  }

  @Test func detectsNoneAndExplains() throws {
    let h = CgroupHierarchy.detect(mountinfo: "22 1 0:21 / /proc rw - proc proc rw\n", cgroup: "")
    #expect(h.kind == .none)
    #expect(throws: CgroupError.notMounted(.memory)) { try h.placement(.memory) }
    #expect(CgroupError.notMounted(.memory).description.hasPrefix("no memory cgroup:"))
    // Bound to a v1 hierarchy that this mount namespace does not show.
    let unmounted = CgroupHierarchy.detect(mountinfo: "", cgroup: "4:memory:/a\n0::/a\n")
    #expect(throws: CgroupError.boundButNotMounted(.memory, path: "/a")) { try unmounted.placement(.memory) }
  }

  /// A container's bind mount shows a subtree: the host's path is made relative to the mount's
  /// root; paths outside it are not visible; escaped spaces in mount points are decoded.
  @Test func detectsBindMountedSubtreesAndEscapes() {
    let info = "50 40 0:30 /docker/abc /sys/fs/cgroup/my\\040memory rw - cgroup cgroup rw,memory\n"
    let inside = CgroupHierarchy.detect(mountinfo: info, cgroup: "4:memory:/docker/abc/app\n")
    #expect(
      inside.controllers[.memory]
        == .found(
          .init(
            version: .v1, mountPoint: "/sys/fs/cgroup/my memory", directory: "/sys/fs/cgroup/my memory/app")))
    let outside = CgroupHierarchy.detect(mountinfo: info, cgroup: "4:memory:/docker/abcdef\n")
    guard case .unavailable(.notVisible(.memory, let path, _)) = outside.controllers[.memory] else {
      Issue.record("\(String(describing: outside.controllers[.memory]))")
      return
    }
    #expect(path == "/docker/abcdef")
  }

  /// This machine, as the kernel shows it: whatever it has, memory and pids are found or refused
  /// with a reason (never silently absent).
  @Test func detectsThisMachine() throws {
    let h = try CgroupHierarchy.current(files: KernelCgroupFiles())
    // cpu is optional: the host does without it (and says so), so it may be refused here.
    for c in CgroupController.allCases where !c.isOptional {
      switch h.controllers[c] {
      case .found?: break
      case .unavailable(let why)?:
        // Only where the host really has no cgroups: where it made them, both were found.
        if case .success = HostCgroups.workerCgroups { Issue.record("\(c) unavailable: \(why)") }
      case nil: Issue.record("\(c) neither found nor refused")
      }
    }
    print(
      "WorkerCgroupTests: this machine's cgroups are \(h.kind): \(h.controllers.sorted { $0.key < $1.key })")
  }
}

/// A temporary directory playing a cgroup filesystem by the kernel's rules, as far as the host's
/// logic depends on them: interface files appear with the controllers the parent enables; v2
/// refuses controllers for the children of a cgroup with processes (the root excepted) and
/// processes in a cgroup whose children have controllers; removal needs an empty cgroup.
final class FakeCgroupFS: CgroupFiles {
  enum Version { case v1, v2 }
  let version: Version
  let dir = TemporaryDirectory("fake-cgroupfs")
  private let state = Mutex(State())

  private struct State {
    var proc: [String: String] = [:]
    var alive: Set<Int32> = []
    var unmovable: Set<Int32> = []
    var refuseDirectories = false
    var killedThroughCgroupKill: [Int32] = []
    var pauses = 0
    var killedOneByOne: [Int32] = []
    var hybrid = false
    var refusedUnder: String?
    var v1Hierarchies: [String] = []
  }

  var root: String { dir.path }
  /// v2: the one mount point.
  var mount: String { dir.url("cgroup") }

  private init(version: Version) { self.version = version }

  /// A hybrid tree: v1 hierarchies, and cgroup2 at `mount` (v2 rules apply there).
  private var hybrid: Bool {
    get { state.withLock { $0.hybrid } }
    set { state.withLock { $0.hybrid = newValue } }
  }
  /// The v1 hierarchies' directory names (`cpu,cpuacct` for co-mounted ones).
  private var v1Hierarchies: [String] {
    get { state.withLock { $0.v1Hierarchies } }
    set { state.withLock { $0.v1Hierarchies = newValue } }
  }
  /// Whether `path` follows cgroup v2's rules.
  private func isV2(_ path: String) -> Bool { version == .v2 || (hybrid && path.hasPrefix(mount)) }

  /// The texts of /proc/self/mountinfo, /proc/self/cgroup and /proc/swaps this tree answers with.
  var proc: [String: String] {
    get { state.withLock { $0.proc } }
    set { state.withLock { $0.proc = newValue } }
  }

  static func v2(hostCgroup: String, offered: String, hostProcesses: [Int32]) throws -> FakeCgroupFS {
    let fs = FakeCgroupFS(version: .v2)
    fs.proc = [
      "/proc/self/mountinfo":
        "30 23 0:26 / \(fs.mount) rw,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
      "/proc/self/cgroup": "0::\(hostCgroup)\n", "/proc/swaps": "Filename\tType\n",
    ]
    // The root offers every controller; each ancestor of the host's cgroup delegates `offered`.
    try FileManager.default.createDirectory(atPath: fs.mount, withIntermediateDirectories: true)
    try fs.put("cgroup.controllers", "cpu io memory pids")
    try fs.put("cgroup.subtree_control", "")
    try fs.put("cgroup.procs", "")
    var path = ""
    for part in hostCgroup.split(separator: "/") {
      try fs.put(path + (path.isEmpty ? "" : "/") + "cgroup.subtree_control", offered)
      path += (path.isEmpty ? "" : "/") + part
      try fs.makeDirectory(fs.mount + "/" + path)
    }
    for pid in hostProcesses { fs.spawn(pid, in: path) }
    return fs
  }

  /// v1 hierarchies for memory, pids and (unless nil) `cpu`, mounted alone ("cpu") or co-mounted
  /// ("cpu,cpuacct"); with `unified`, also a cgroup2 tree (hybrid) whose root offers those
  /// controllers, the host in its root. `cpuBound` false leaves cpu out of /proc/self/cgroup's
  /// v1 lines, so it is looked for in the unified tree.
  static func v1(
    memoryCgroup: String, memsw: Bool, swapOn: Bool, cpu: String? = "cpu", unified: String? = nil,
    cpuBound: Bool = true
  ) throws -> FakeCgroupFS {
    let fs = FakeCgroupFS(version: .v1)
    fs.hybrid = unified != nil
    var mountinfo = """
      35 31 0:32 / \(fs.root)/memory rw,relatime - cgroup cgroup rw,memory
      39 31 0:36 / \(fs.root)/pids rw,relatime - cgroup cgroup rw,pids
      """
    var cgroup = "8:pids:/\n4:memory:\(memoryCgroup)\n"
    var hierarchies = ["memory", "pids"]
    if let cpu {
      mountinfo += "\n32 31 0:29 / \(fs.root)/\(cpu) rw,relatime - cgroup cgroup rw,\(cpu)"
      if cpuBound { cgroup += "1:\(cpu):/\n" }
      hierarchies.append(cpu)
    }
    if let unified {
      mountinfo += "\n41 31 0:38 / \(fs.mount) rw,relatime - cgroup2 cgroup2 rw"
      cgroup += "0::/\n"
      try FileManager.default.createDirectory(atPath: fs.mount, withIntermediateDirectories: true)
      try fs.put("cgroup.controllers", unified)
      try fs.put("cgroup.subtree_control", "")
      try fs.put("cgroup.procs", "")
    }
    fs.proc = [
      "/proc/self/mountinfo": mountinfo + "\n", "/proc/self/cgroup": cgroup,
      "/proc/swaps": "Filename\tType\tSize\tUsed\tPriority\n"
        + (swapOn ? "/swapfile file 1048576 0 -2\n" : ""),
    ]
    fs.v1Hierarchies = hierarchies
    for hierarchy in hierarchies {
      try FileManager.default.createDirectory(
        atPath: fs.dir.url(hierarchy), withIntermediateDirectories: true)
      try fs.v1Files(fs.dir.url(hierarchy), memsw: memsw)
    }
    var path = fs.dir.url("memory")
    for part in memoryCgroup.split(separator: "/") {
      path += "/" + part
      try fs.makeDirectory(path)
    }
    return fs
  }

  // Test controls and observations.
  /// A process's parent and command, as /proc shows them.
  func describe(_ pid: Int32, parent: Int32, name: String) {
    state.withLock {
      $0.proc["/proc/\(pid)/stat"] = "\(pid) (\(name) (x)) S \(parent) \(pid) \(pid) 0 -1\n"
      $0.proc["/proc/\(pid)/comm"] = name + "\n"
    }
  }
  func setAlive(_ pid: Int32) { state.withLock { _ = $0.alive.insert(pid) } }
  func unmovable(_ pid: Int32) { state.withLock { _ = $0.unmovable.insert(pid) } }
  func refuseDirectories() { state.withLock { $0.refuseDirectories = true } }
  /// mkdir refused (EACCES) below `relative` only, e.g. one v1 hierarchy.
  func refuseDirectories(under relative: String) {
    state.withLock { $0.refusedUnder = root + "/" + relative }
  }
  var killedThroughCgroupKill: [Int32] { state.withLock { $0.killedThroughCgroupKill } }
  var pauses: Int { state.withLock { $0.pauses } }
  var killedOneByOne: [Int32] { state.withLock { $0.killedOneByOne } }

  private func full(_ relative: String, underRoot: Bool) -> String {
    (underRoot ? root : mount) + (relative.isEmpty ? "" : "/" + relative)
  }
  func text(_ relative: String, underRoot: Bool = false) throws -> String {
    try String(contentsOfFile: full(relative, underRoot: underRoot), encoding: .utf8)
  }
  func put(_ relative: String, _ text: String, underRoot: Bool = false) throws {
    try text.write(toFile: full(relative, underRoot: underRoot), atomically: false, encoding: .utf8)
  }
  func has(_ relative: String, underRoot: Bool = false) -> Bool {
    FileManager.default.fileExists(atPath: full(relative, underRoot: underRoot))
  }
  /// A process appears in a cgroup (as a fork of something inside it would).
  func spawn(_ pid: Int32, in relative: String, underRoot: Bool = false) {
    setAlive(pid)
    let procs = full(relative, underRoot: underRoot) + "/cgroup.procs"
    let now = (try? String(contentsOfFile: procs, encoding: .utf8)) ?? ""
    try? (now.isEmpty ? "\(pid)" : now + "\n\(pid)").write(toFile: procs, atomically: false, encoding: .utf8)
  }

  // CgroupFiles: /proc from the table, the rest from the tree with the kernel's rules.
  func read(_ path: String) throws(CgroupFileError) -> String {
    if let text = state.withLock({ $0.proc[path] }) { return text }
    guard !path.hasPrefix("/proc/") else { throw CgroupFileError("open", path, code: ENOENT) }
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
      throw CgroupFileError("open", path, code: ENOENT)
    }
    return text
  }

  func write(_ path: String, _ text: String) throws(CgroupFileError) {
    let directory = (path as NSString).deletingLastPathComponent
    let name = (path as NSString).lastPathComponent
    guard exists(path) else { throw CgroupFileError("open", path, code: ENOENT) }
    let isRoot = directory == mount || v1Hierarchies.contains { directory == dir.url($0) }
    switch name {
    case "cgroup.subtree_control":
      let offered = words(directory + "/cgroup.controllers")
      var enabled = words(path)
      for token in text.split(separator: " ") {
        let c = String(token.dropFirst())
        guard offered.contains(c) else { throw CgroupFileError("write", path, code: ENOENT) }
        guard isRoot || words(directory + "/cgroup.procs").isEmpty else {
          throw CgroupFileError("write", path, code: EBUSY)
        }
        if token.hasPrefix("+") { enabled.append(c) } else { enabled.removeAll { $0 == c } }
      }
      store(path, Array(Set(enabled)).sorted().joined(separator: " "))
      // As the kernel does, existing children get the newly enabled controllers' files.
      for child in (try? subdirectories(directory)) ?? [] {
        for (name, text) in Self.v2Files(enabled) where !exists(directory + "/" + child + "/" + name) {
          store(directory + "/" + child + "/" + name, text)
        }
      }
    case "cgroup.procs":
      guard let pid = Int32(text) else { throw CgroupFileError("write", path, code: EINVAL) }
      if isV2(path) && !isRoot && !words(directory + "/cgroup.subtree_control").isEmpty {
        throw CgroupFileError("write", path, code: EBUSY)
      }
      if state.withLock({ $0.unmovable.contains(pid) }) { throw CgroupFileError("write", path, code: EPERM) }
      removeEverywhere(pid)
      store(path, (words(path) + [String(pid)]).joined(separator: "\n"))
    case "cgroup.kill":
      let pids = words(directory + "/cgroup.procs").compactMap { Int32($0) }
      state.withLock { $0.killedThroughCgroupKill += pids }
      store(directory + "/cgroup.procs", "")
    default:
      store(path, text)
    }
  }

  func makeDirectory(_ path: String) throws(CgroupFileError) {
    if state.withLock({ $0.refuseDirectories || $0.refusedUnder.map { path.hasPrefix($0 + "/") } == true }) {
      throw CgroupFileError("mkdir", path, code: EACCES)
    }
    guard !exists(path) else { throw CgroupFileError("mkdir", path, code: EEXIST) }
    do {
      try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
      let parent = (path as NSString).deletingLastPathComponent
      if !isV2(path) {
        try v1Files(path, memsw: exists(parent + "/memory.memsw.limit_in_bytes"))
        return
      }
      let enabled = words(parent + "/cgroup.subtree_control")
      let files = [
        "cgroup.procs": "", "cgroup.subtree_control": "", "cgroup.kill": "",
        "cgroup.controllers": enabled.joined(separator: " "),
      ].merging(Self.v2Files(enabled)) { a, _ in a }
      for (name, text) in files { store(path + "/" + name, text) }
    } catch {
      throw CgroupFileError("mkdir", path, code: EIO)
    }
  }

  /// v2: the interface files `controllers` add to a cgroup whose parent enables them.
  private static func v2Files(_ controllers: [String]) -> [String: String] {
    var files: [String: String] = [:]
    if controllers.contains("memory") {
      files.merge([
        "memory.max": "max", "memory.swap.max": "max", "memory.oom.group": "0", "memory.peak": "0",
        "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",
      ]) { a, _ in a }
    }
    if controllers.contains("pids") {
      files.merge(["pids.max": "max", "pids.events": "max 0\n"]) { a, _ in a }
    }
    if controllers.contains("cpu") {
      files.merge(["cpu.weight": "100", "cpu.max": "max 100000", "cpu.stat": "usage_usec 0\n"]) { a, _ in a }
    }
    return files
  }

  fileprivate func v1Files(_ path: String, memsw: Bool) throws {
    var files = ["cgroup.procs": "", "tasks": ""]
    if path.hasPrefix(dir.url("cpu")) {
      // cpu,cpuacct co-mounted shows cpuacct's files too.
      files.merge(["cpu.shares": "1024", "cpu.cfs_quota_us": "-1", "cpu.cfs_period_us": "100000"]) { a, _ in a
      }
      if path.hasPrefix(dir.url("cpu,cpuacct")) { files["cpuacct.usage"] = "0" }
    } else if path.hasPrefix(dir.url("memory")) {
      files.merge([
        "memory.limit_in_bytes": "9223372036854771712", "memory.swappiness": "60",
        "memory.failcnt": "0", "memory.max_usage_in_bytes": "0",
        "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
      ]) { a, _ in a }
      if memsw { files["memory.memsw.limit_in_bytes"] = "9223372036854771712" }
    } else {
      files.merge(["pids.max": "max", "pids.events": "max 0\n"]) { a, _ in a }
    }
    for (name, text) in files { store(path + "/" + name, text) }
  }

  func removeDirectory(_ path: String) throws(CgroupFileError) {
    guard exists(path) else { throw CgroupFileError("rmdir", path, code: ENOENT) }
    guard words(path + "/cgroup.procs").isEmpty else { throw CgroupFileError("rmdir", path, code: EBUSY) }
    guard (try? subdirectories(path))?.isEmpty == true else {
      throw CgroupFileError("rmdir", path, code: ENOTEMPTY)
    }
    do { try FileManager.default.removeItem(atPath: path) } catch {
      throw CgroupFileError("rmdir", path, code: EIO)
    }
  }

  func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

  func subdirectories(_ path: String) throws(CgroupFileError) -> [String] {
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else {
      throw CgroupFileError("opendir", path, code: ENOENT)
    }
    return names.filter { n in
      var isDirectory: ObjCBool = false
      return FileManager.default.fileExists(atPath: path + "/" + n, isDirectory: &isDirectory)
        && isDirectory.boolValue
    }.sorted()
  }

  func owner(_ path: String) -> UInt32? { 0 }
  func isAlive(_ pid: Int32) -> Bool { state.withLock { $0.alive.contains(pid) } }

  func kill(_ pid: Int32) {
    state.withLock {
      $0.killedOneByOne.append(pid)
      $0.alive.remove(pid)
    }
    removeEverywhere(pid)
  }

  func pause(milliseconds: Int) { state.withLock { $0.pauses += 1 } }

  private func words(_ path: String) -> [String] {
    ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(whereSeparator: \.isWhitespace).map(
      String.init)
  }

  private func store(_ path: String, _ text: String) {
    try? text.write(toFile: path, atomically: false, encoding: .utf8)
  }

  private func removeEverywhere(_ pid: Int32) {
    guard let all = FileManager.default.enumerator(atPath: root) else { return }
    for case let relative as String in all where relative.hasSuffix("cgroup.procs") {
      let path = root + "/" + relative
      let kept = words(path).filter { $0 != String(pid) }
      store(path, kept.joined(separator: "\n"))
    }
  }
}
