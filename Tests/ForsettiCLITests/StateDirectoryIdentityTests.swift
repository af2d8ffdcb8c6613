import ForsettiTestSupport
import Foundation
import Testing

/// A host owns its state directory by identity, not by path: `mv S S.old; mkdir S` under a running
/// host, then a second host on `S`. The first notices, stops its modules and touches nothing at
/// `S` (the second's socket, runtime.json and lock stay its own); `S.old` keeps the first's files.
///
/// The first host is frozen (SIGSTOP) across the swap and the second's start, so that it can only
/// act after the second host owns `S` — the moment at which, before, it unlinked the second's
/// socket and wrote its runtime.json. Every wait is on an event: a published runtime.json, a
/// socket appearing, an output line, an exit.
@Suite(.onTestThreads, .serialized, .timeLimit(.minutes(5)))
struct StateDirectoryIdentityTests: LiveHostSuite {
  let dir = TemporaryDirectory("identity")

  var moved: String { state + ".old" }

  /// `run` on `stateDirectory` as `user`, with a safety net longer than any wait here: a host that
  /// failed to notice must not stop by itself during the test.
  func host(on stateDirectory: String, as user: HostileHost.Identity = .current) throws -> DevHost {
    let args = [
      "run", "--manifests", manifests, "--plugins", dir.url("plugins"), "--state", stateDirectory, "--for",
      "240",
    ]
    guard user == .unprivileged else { return try DevHost.launch(args) }
    return try DevHost(
      Self.asNobody + [HostBinary.forOtherUsers] + args, verb: nil, executable: "/usr/bin/setpriv")
  }

  static let nobody = HostileHost.nobody
  static let asNobody = ["--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups", "--"]

  /// A state directory made for `user` (as an operator makes one for a service's user).
  func makeState(_ path: String, for user: HostileHost.Identity) throws {
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
    if user == .unprivileged { #expect(chown(path, Self.nobody, Self.nobody) == 0) }
  }

  /// `forsetti-host ARGS` to completion, as `user`.
  func command(_ args: [String], as user: HostileHost.Identity) throws -> ProcessResult {
    guard user == .unprivileged else { return try HostBinary.run(args) }
    return try ProcessRunner.run("/usr/bin/setpriv", Self.asNobody + [HostBinary.forOtherUsers] + args)
  }

  /// Waits until `host` publishes `expected` in `stateDirectory` and its control socket is there.
  func ready(_ host: DevHost, on stateDirectory: String, _ expected: [String: String]) throws {
    let w = LiveHost.wait(
      stateDirectory: stateDirectory, pid: host.process.processIdentifier, for: expected, timeout: 60,
      isRunning: { host.process.isRunning })
    try #require(w.reached, why(w, host))
    try #require(
      LiveHost.awaitSocket(stateDirectory: stateDirectory, isRunning: { host.process.isRunning }),
      "no \(stateDirectory)/control.sock")
  }

  /// The device and inode of `path` itself (not followed), or nil when nothing is there.
  func identity(_ path: String) -> [UInt64]? {
    var st = stat()
    guard lstat(path, &st) == 0 else { return nil }
    return [UInt64(st.st_dev), UInt64(st.st_ino)]
  }

  /// Sends SIGSTOP and waits until every thread of `pid` has stopped (`T` in /proc/PID/stat):
  /// kill(2) returns before the stop takes effect.
  func freeze(_ pid: Int32) {
    #expect(kill(pid, SIGSTOP) == 0)
    let end = Date().addingTimeInterval(60)
    while Date() < end {
      let stat = text("/proc/\(pid)/stat")
      // The state follows the command name's closing parenthesis.
      if let close = stat.lastIndex(of: ")"), stat[close...].dropFirst(2).first == "T" { return }
      usleep(2_000)
    }
    Issue.record("pid \(pid) did not stop")
  }

  func text(_ path: String) -> String {
    (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
  }

  @Test(arguments: HostileHost.Identity.allCases)
  func aHostWhoseStateDirectoryIsSwappedStopsAndLeavesTheNewOneAlone(as user: HostileHost.Identity) throws {
    try #require(user == .current || geteuid() == 0, "running as another user needs root")
    chmod(dir.path, 0o755)
    try module("com.test.one")
    try makeState(state, for: user)
    let first = try host(on: state, as: user)
    defer {
      kill(first.process.processIdentifier, SIGCONT)
      first.stop()
    }
    try ready(first, on: state, ["com.test.one": "started"])
    let firstPID = first.process.processIdentifier

    freeze(firstPID)
    try FileManager.default.moveItem(atPath: state, toPath: moved)
    try makeState(state, for: user)

    let second = try host(on: state, as: user)
    defer { second.stop() }
    try ready(second, on: state, ["com.test.one": "started"])
    let secondPID = second.process.processIdentifier
    let socket = try #require(identity(state + "/control.sock"))

    // The first host's lock is on the directory it holds: a third host there is refused, naming it.
    let third = try command(
      ["run", "--manifests", manifests, "--plugins", dir.url("plugins"), "--state", moved, "--for", "1"],
      as: user)
    #expect(third.status == 2, "\(third.stdout)\(third.stderr)")
    #expect(third.stderr.contains("pid \(firstPID)"), "\(third.stderr)")

    #expect(kill(firstPID, SIGCONT) == 0)
    // Frozen across the swap, it finds another directory at S when it looks.
    let noticed = first.awaitAny(["state directory \(state) was "], timeout: 120)
    #expect(
      noticed != nil,
      "host 1 did not notice; its last lines:\n\(first.lines.suffix(30).joined(separator: "\n"))")
    // A host that did not notice is stopped as an operator would: what it does then is checked too.
    if noticed == nil { kill(firstPID, SIGTERM) }
    first.process.waitUntilExit()
    #expect(first.process.terminationStatus == 75, "\(first.lines.suffix(30).joined(separator: "\n"))")
    // Its modules stopped as on SIGTERM.
    #expect(first.lines.contains { $0.contains("bye from com.test.one") }, "\(first.lines)")

    // The second host's directory is its own: its socket, its runtime.json, and status says so.
    #expect(identity(state + "/control.sock") == socket, "host 1 removed or replaced host 2's control socket")
    #expect(RuntimeSnapshot.read(stateDirectory: state)?.pid == secondPID)
    let status = try command(["status", "--state", state], as: user)
    #expect(status.status == 0, "\(status.stdout)\(status.stderr)")
    #expect(status.stdout.hasPrefix("running: pid \(secondPID)"), "\(status.stdout)\(status.stderr)")
    #expect(!text(state + "/logs/host.log").contains("state directory"), "host 1 wrote into host 2's log")
    #expect(second.process.isRunning)

    // The moved directory keeps the first host's files, to its last line; its own socket it removed.
    #expect(RuntimeSnapshot.read(stateDirectory: moved)?.pid == firstPID)
    var st = stat()
    #expect(stat(moved + "/runtime.json", &st) == 0)
    #expect(
      st.st_uid == (user == .unprivileged ? Self.nobody : geteuid()), "runtime.json's owner \(st.st_uid)")
    #expect(identity(moved + "/control.sock") == nil, "host 1 left its socket in \(moved)")
    let log = text(moved + "/logs/host.log")
    #expect(
      log.contains("state directory \(state) was replaced: another directory is at that path now"),
      "\(log.suffix(2000))")
    #expect(log.contains("(the directory this host holds is now \(moved))"), "\(log.suffix(2000))")
    #expect(log.contains("stopping all modules (state directory replaced)"), "\(log.suffix(2000))")
  }

  /// Issue 40, third finding: `ln -s r1 cur; run --state cur/st`, then `ln -s r2 cur.tmp && mv -T
  /// cur.tmp cur` and a second host on `cur/st`: both hosts ran the same module (60 of 60), as the
  /// hold watched the directory and its parent, not the link above them. Now every directory the
  /// path goes through is watched for the entry the path takes: the swap is noticed at once
  /// (with no second host yet), the first host stops with 75, and a second host on the path then
  /// runs alone. Entries created and removed beside the link first change nothing: the host
  /// is still the one in runtime.json after them (the control, before the swap is noticed).
  @Test(arguments: HostileHost.Identity.allCases)
  func aLinkSwappedAboveTheStateDirectoryIsAReplacement(as user: HostileHost.Identity) throws {
    try #require(user == .current || geteuid() == 0, "running as another user needs root")
    chmod(dir.path, 0o755)
    try module("com.test.one")
    for r in ["r1", "r2"] {
      try FileManager.default.createDirectory(atPath: dir.url(r), withIntermediateDirectories: true)
      chmod(dir.url(r), 0o755)
      try makeState(dir.url("\(r)/st"), for: user)
    }
    try FileManager.default.createSymbolicLink(atPath: dir.url("cur"), withDestinationPath: "r1")
    let path = dir.url("cur/st")
    let first = try host(on: path, as: user)
    defer { first.stop() }
    try ready(first, on: path, ["com.test.one": "started"])
    let firstPID = first.process.processIdentifier
    // Beside the link, nothing the path goes through: the host stays.
    try FileManager.default.createSymbolicLink(atPath: dir.url("other"), withDestinationPath: "r2")
    try FileManager.default.removeItem(atPath: dir.url("other"))
    _ = try dir.write("unrelated.txt", "x")
    #expect(
      try command(["status", "--state", path], as: user).stdout.hasPrefix("running: pid \(firstPID)"),
      "\(first.lines.suffix(10))")

    try FileManager.default.createSymbolicLink(atPath: dir.url("cur.tmp"), withDestinationPath: "r2")
    #expect(rename(dir.url("cur.tmp"), dir.url("cur")) == 0)
    let noticed = first.awaitAny(["state directory \(path) was "], timeout: 60)
    #expect(noticed != nil, "\(first.lines.suffix(20).joined(separator: "\n"))")
    if noticed == nil { kill(firstPID, SIGTERM) }
    first.process.waitUntilExit()
    #expect(first.process.terminationStatus == 75, "\(first.lines.suffix(20).joined(separator: "\n"))")
    #expect(first.lines.contains { $0.contains("bye from com.test.one") }, "\(first.lines)")

    let second = try host(on: path, as: user)
    defer { second.stop() }
    try ready(second, on: path, ["com.test.one": "started"])
    #expect(RuntimeSnapshot.read(stateDirectory: dir.url("r2/st"))?.pid == second.process.processIdentifier)
    #expect(RuntimeSnapshot.read(stateDirectory: dir.url("r1/st"))?.pid == firstPID)
  }

  /// The positive control: the same freeze, and the parent directory's entries changing beside the
  /// state directory (which the host watches), but the state directory stays: the host keeps
  /// running, writes runtime.json on a change, and removes its own socket when it stops.
  @Test func aHostWhoseStateDirectoryStaysKeepsRunningAndWriting() throws {
    try module("com.test.one")
    try module("com.test.two")
    let first = try host(on: state)
    defer {
      kill(first.process.processIdentifier, SIGCONT)
      first.stop()
    }
    try ready(first, on: state, ["com.test.one": "started", "com.test.two": "started"])
    let pid = first.process.processIdentifier

    freeze(pid)
    let sibling = dir.url("sibling")
    try FileManager.default.createDirectory(atPath: sibling, withIntermediateDirectories: false)
    try FileManager.default.moveItem(atPath: sibling, toPath: sibling + ".old")
    try FileManager.default.createDirectory(atPath: sibling, withIntermediateDirectories: false)
    #expect(kill(pid, SIGCONT) == 0)

    // Answered by the host (it is the only one that can write runtime.json under its pid).
    try cli(["disable", "com.test.two", "--state", state])
    let w = published(
      ["com.test.one": "started", "com.test.two": "inactive/moduleDisabled"], by: first, timeout: 60)
    #expect(w.reached, why(w, first))
    #expect(first.process.isRunning)
    #expect(!first.lines.contains { $0.contains("state directory") && $0.contains("was") }, "\(first.lines)")

    first.stop()
    #expect(first.process.terminationStatus == 0)
    #expect(identity(state + "/control.sock") == nil, "the host did not remove its own socket")
  }
}
