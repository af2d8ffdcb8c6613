import ForsettiCore
import ForsettiTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

/// The control socket cannot be turned against the host or the operator (issue 26, parts 2–4):
/// any arguments of any served verb get an answer, never a trap; slow clients neither hold a
/// request open past its deadline nor keep `status` out; a host that dies mid-request is told
/// apart from a usage error; and the CLI sends nothing to, and shows nothing from, a socket that
/// is not its host's. Real `forsetti-host` processes and real sockets throughout.
@Suite(.onTestThreads, .serialized, .timeLimit(.minutes(5))) struct ControlLimitsTests: LiveHostSuite {
  let dir = TemporaryDirectory("limits")

  var socket: String { state + "/control.sock" }

  /// Waits for `host` to publish `expected` and for its socket.
  func ready(_ host: DevHost, _ expected: [String: String], sourceLocation: SourceLocation = #_sourceLocation)
    throws
  {
    let w = published(expected, by: host)
    try #require(
      w.reached, "\(w)\n\(host.lines.suffix(30).joined(separator: "\n"))", sourceLocation: sourceLocation)
    // Answering, not just there: the host makes the socket before it serves its first round.
    let end = Date().addingTimeInterval(60)
    while Self.ask(socket, ControlRequest(.status)) == nil && host.process.isRunning && Date() < end {
      usleep(20_000)
    }
    try #require(
      Self.ask(socket, ControlRequest(.status)) != nil, "the host never answered status",
      sourceLocation: sourceLocation)
  }

  /// `forsetti-host run` on this directory with a longer safety net than the suite's 30 s.
  func launchLong() throws -> DevHost {
    try DevHost.launch(
      ["run", "--manifests", manifests, "--plugins", dir.url("plugins"), "--state", state, "--for", "240"])
  }

  func shown(_ r: ProcessResult) -> Comment {
    "status \(r.status)\nstdout:\n\(r.stdout)\nstderr:\n\(r.stderr)"
  }

  // MARK: - A raw client

  /// A connected unix socket to `path`, or -1.
  static func connectTo(_ path: String) -> Int32 {
    let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return -1 }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
      close(fd)
      return -1
    }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
      for (i, b) in bytes.enumerated() { raw[i] = b }
      raw[bytes.count] = 0
    }
    let rc = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
      }
    }
    guard rc == 0 else {
      close(fd)
      return -1
    }
    return fd
  }

  static func send(_ fd: Int32, _ text: String) -> Bool {
    let bytes = Array(text.utf8)
    return bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
      == bytes.count
  }

  /// Everything the peer sends until it closes (or `timeout` seconds pass).
  static func readAll(_ fd: Int32, timeout: Int = 60) -> [UInt8] {
    var t = timeval(tv_sec: timeout, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, socklen_t(MemoryLayout<timeval>.size))
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
      let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
      if n <= 0 { break }
      out += buffer[0..<n]
    }
    return out
  }

  /// Sends one request line as a client would and decodes the host's answer.
  static func ask(_ socket: String, _ request: ControlRequest) -> ControlResponse? {
    ask(socket, line: String(decoding: request.line, as: UTF8.self))
  }

  /// Sends `line` (a newline is added) and decodes the host's answer.
  static func ask(_ socket: String, line: String) -> ControlResponse? {
    let fd = connectTo(socket)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    guard send(fd, line.hasSuffix("\n") ? line : line + "\n") else { return nil }
    let bytes = readAll(fd)
    guard let nl = bytes.firstIndex(of: 0x0A) else { return nil }
    return try? ControlResponse.decode(Array(bytes[..<nl])).get()
  }

  // MARK: - Every verb's fields, total

  /// Request objects no verb may trap on (`V` stands for the verb), and the code of the
  /// refusal each must get from every verb (nil: any answer will do).
  static let hostileRequests: [(request: String, code: ControlFailure.Code?)] = [
    (#"{"verb":"V"}"#, nil), (#"{"verb":"V","module":7}"#, .usage), (#"{"verb":"V","bogus":true}"#, .usage),
    (#"{"verb":"V","module":""}"#, .usage), (#"{"verb":"V","module":"com.test.nope"}"#, nil),
    (#"{"verb":"V","module":"com.test.nope","capabilities":["root"]}"#, .usage),
    (#"{"verb":"V","action":"list","manifests":"/elsewhere"}"#, .usage),
    (#"{"verb":"V","module":"com.test.one","none":true}"#, .usage),
  ]

  /// `approve --help` crashed the host (issue 26, 2): now every served verb, given a field of
  /// the wrong type, an unknown one, nothing, too much, is answered (a typed refusal naming
  /// the field), and the host goes on answering `status` after each.
  @Test func everyServedVerbAnswersAnyFieldsAndTheHostLives() throws {
    try module("com.test.one")
    let host = try launchLong()
    defer { host.stop() }
    try ready(host, ["com.test.one": "started"])
    for verb in ControlRequest.verbs.sorted() {
      // A well-formed `upgrade` upgrades the host (UpgradeTests): only its malformed ones here.
      for (request, code) in Self.hostileRequests where verb != "upgrade" || code != nil {
        let line =
          #"{"protocol":2,"request":"# + request.replacingOccurrences(of: #""V""#, with: "\"\(verb)\"") + "}"
        let answer = try #require(
          Self.ask(socket, line: line),
          "\(line): no answer; host running: \(host.process.isRunning)\n\(host.lines.suffix(20).joined(separator: "\n"))"
        )
        // Every entry with a code is malformed for every verb: it must be refused with it.
        if let code { #expect(answer.failure?.code == code, "\(line): \(answer)") }
        #expect(answer.pid == host.process.processIdentifier, "\(line): \(answer)")
      }
      // Still the same host, still answering.
      #expect(
        host.process.isRunning,
        "\(verb) took the host down:\n\(host.lines.suffix(30).joined(separator: "\n"))")
      let status = try #require(Self.ask(socket, ControlRequest(.status)), "status after \(verb)")
      guard case .answered(let a, _) = status.outcome else {
        Issue.record("status after \(verb): \(status)")
        continue
      }
      #expect(a.objectValue?["running"] == .bool(true) && status.pid == host.process.processIdentifier)
    }
    // The field a refusal names, for a verb that takes a module.
    let wrong = try #require(
      Self.ask(socket, line: #"{"protocol":2,"request":{"verb":"explain","module":7}}"#))
    #expect(wrong.failure?.code == .usage, "\(wrong)")
    #expect(wrong.failure?.message.contains(#""module" must be a string, not number"#) == true, "\(wrong)")
    let extra = try #require(
      Self.ask(socket, line: #"{"protocol":2,"request":{"verb":"list","plugins":["/tmp"]}}"#))
    #expect(extra.failure?.message.contains(#""plugins" is not a field of list"#) == true, "\(extra)")
    // Positive control: a well-formed request of the same shape is answered.
    let good = try #require(Self.ask(socket, ControlRequest(.explain(module: "com.test.one"))))
    #expect(good.failure == nil, "\(good)")
    let w = published(["com.test.one": "started"], by: host)
    #expect(w.reached, "\(w)")
    #expect(!host.lines.contains { $0.contains("Fatal error") }, "\(host.lines)")
  }

  /// A protocol-1 client (argv and captured text) is refused with a reason that names
  /// protocol 2; the host goes on.
  @Test func aProtocolOneClientIsRefusedClearly() throws {
    try module("com.test.one")
    let host = try launchLong()
    defer { host.stop() }
    try ready(host, ["com.test.one": "started"])
    let old = try #require(Self.ask(socket, line: #"{"protocol":1,"verb":"list","arguments":["--json"]}"#))
    #expect(old.failure?.code == .usage, "\(old)")
    #expect(old.failure?.message.contains("protocol 2") == true, "\(old)")
    #expect(old.failure?.message.contains("protocol 1") == true, "\(old)")
    let now = try #require(Self.ask(socket, ControlRequest(.list)))
    #expect(now.failure == nil, "\(now)")
  }

  // MARK: - Slow clients

  /// A client that connects and sends a byte every `every` seconds, never a whole line, and
  /// connects again whenever the host closes it, until stopped.
  final class Trickler: Sendable {
    let connections = Atomic<Int>(0)
    let cut = Atomic<Int>(0)
    let stopped = Atomic<Bool>(false)
    let lastAnswer = Mutex("")

    func start(_ path: String, every: Double) {
      Thread.detachNewThread { [self] in
        while !stopped.load(ordering: .acquiring) {
          let fd = ControlLimitsTests.connectTo(path)
          guard fd >= 0 else {
            usleep(50_000)
            continue
          }
          connections.add(1, ordering: .relaxed)
          var alive = ControlLimitsTests.send(fd, "{")
          while alive && !stopped.load(ordering: .acquiring) {
            // Wait `every` seconds, or less if the host closes the connection.
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&p, 1, Int32(every * 1000)) > 0 {
              let bytes = ControlLimitsTests.readAll(fd, timeout: 1)
              lastAnswer.withLock { $0 = String(decoding: bytes, as: UTF8.self) }
              cut.add(1, ordering: .relaxed)
              alive = false
            } else {
              alive = ControlLimitsTests.send(fd, " ")
            }
          }
          close(fd)
        }
      }
    }
  }

  /// `forsetti-host status --state STATE`, timed.
  func timedStatus(_ stateDirectory: String? = nil) throws -> (ProcessResult, Double) {
    let start = Date()
    let r = try HostBinary.run(["status", "--state", stateDirectory ?? state])
    return (r, Date().timeIntervalSince(start))
  }

  /// The middle of `times`.
  static func median(_ times: [Double]) -> Double {
    let sorted = times.sorted()
    return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
  }

  /// 16 clients each sending a byte every 4 s kept every verb "busy" (issue 26, 3): now
  /// `status` is answered by the host while they trickle, in a time comparable to its time with
  /// none. 40 as well: fewer than the 64 one uid may have sending at once; and 100 (issue 40:
  /// past that cap, clients of the same uid reconnecting in a loop kept `status` out, 80–98 % of
  /// tries "busy"): a client whose request is there when it is accepted — the command line sends
  /// it as it connects — is served without a reading slot.
  ///
  /// The time with none is a peer's: the same host on a state directory of its own that nobody
  /// trickles at, asked in alternation with this one, so that both see the same load of this
  /// machine (a bound from a quiet moment before was tripped by a loaded one, not by the host).
  /// Medians: a busy answer costs the command line a pause of 50 ms, doubling, so that 80 % of
  /// tries busy puts this host's median above the peer's by 350 ms.
  @Test(arguments: [16, 40, 100]) func statusAnswersWhileSlowClientsTrickle(count: Int) throws {
    try module("com.test.one")
    let host = try launchLong()
    defer { host.stop() }
    try ready(host, ["com.test.one": "started"])
    let answered = "answered by the host running on \(state) (pid \(host.process.processIdentifier))"
    let peerState = dir.url("peer-state")
    let peer = try DevHost.launch(
      [
        "run", "--manifests", manifests, "--plugins", dir.url("plugins"), "--state", peerState, "--for",
        "240",
      ])
    defer { peer.stop() }
    let peerAnswered = "answered by the host running on \(peerState) (pid \(peer.process.processIdentifier))"
    let ready = Date().addingTimeInterval(60)
    while try !timedStatus(peerState).0.stderr.contains(peerAnswered) && peer.process.isRunning
      && Date() < ready
    {
      usleep(50_000)
    }
    try #require(try timedStatus(peerState).0.stderr.contains(peerAnswered), "the peer never answered")

    let slow = (0..<count).map { _ in Trickler() }
    defer { for s in slow { s.stopped.store(true, ordering: .releasing) } }
    for s in slow { s.start(socket, every: 4) }
    let end = Date().addingTimeInterval(30)
    while slow.contains(where: { $0.connections.load(ordering: .relaxed) == 0 }) && Date() < end {
      usleep(20_000)
    }
    try #require(
      !slow.contains { $0.connections.load(ordering: .relaxed) == 0 }, "the slow clients connected")

    var loaded: [Double] = []
    var alone: [Double] = []
    // Across more than one request deadline, so that some are cut and come back meanwhile.
    let until = Date().addingTimeInterval(7)
    while Date() < until || loaded.count < 5 {
      let (r, t) = try timedStatus()
      #expect(r.status == 0, shown(r))
      #expect(r.stderr.contains(answered), shown(r))
      loaded.append(t)
      let (p, u) = try timedStatus(peerState)
      #expect(p.status == 0 && p.stderr.contains(peerAnswered), shown(p))
      alone.append(u)
    }
    let bound = 2 * Self.median(alone) + 0.1
    print(
      String(
        format:
          "status with %d slow clients: %d runs, median %.3f s, max %.3f s; the peer with none: median %.3f s, max %.3f s (bound %.3f s)",
        count, loaded.count, Self.median(loaded), loaded.max() ?? 0, Self.median(alone), alone.max() ?? 0,
        bound))
    #expect(Self.median(loaded) <= bound, "with slow clients \(loaded), the peer with none \(alone)")
    #expect(host.process.isRunning)
  }

  /// The 5 s is for the whole request line, not each read: a client sending a byte a second is
  /// told so and closed, however long it would go on (the safety bound is only a bound).
  @Test func aTricklingClientIsClosedAtTheWholeRequestDeadline() throws {
    try module("com.test.one")
    let host = try launchLong()
    defer { host.stop() }
    try ready(host, ["com.test.one": "started"])
    let t = Trickler()
    defer { t.stopped.store(true, ordering: .releasing) }
    t.start(socket, every: 1)
    let end = Date().addingTimeInterval(60)
    while t.cut.load(ordering: .relaxed) == 0 && Date() < end { usleep(50_000) }
    #expect(t.cut.load(ordering: .relaxed) > 0, "a client trickling a byte a second was never closed")
    let said = t.lastAnswer.withLock { $0 }
    #expect(said.contains("no complete request within 5.0 s"), "\(said)")
  }

  // MARK: - A host that dies mid-request

  /// What a process is waiting in (`/proc/PID/wchan`).
  static func waitChannel(_ pid: Int32) -> String {
    (try? String(contentsOfFile: "/proc/\(pid)/wchan", encoding: .utf8)) ?? ""
  }

  /// Runs `forsetti-host ARGS` in the background; its result once it ends.
  final class Background: @unchecked Sendable {
    let process = Process()
    let result = Mutex<ProcessResult?>(nil)
    let out = Pipe()
    let err = Pipe()

    init(_ args: [String]) throws {
      process.executableURL = URL(fileURLWithPath: HostBinary.path)
      process.arguments = args
      process.standardOutput = out
      process.standardError = err
      try process.run()
    }

    func wait() -> (status: Int32, stdout: String, stderr: String) {
      let o = out.fileHandleForReading.readDataToEndOfFile()
      let e = err.fileHandleForReading.readDataToEndOfFile()
      process.waitUntilExit()
      return (
        process.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self)
      )
    }
  }

  /// The CLI's request reaches a stopped host; then the host is killed (or, the positive
  /// control, let go on). A killed host is "gone mid-request", exit 4, not "no answer within
  /// 60 s" and the usage error's 2.
  @Test(arguments: [true, false]) func aHostDyingMidRequestIsToldApart(killed: Bool) throws {
    try module("com.test.one")
    let host = try launchLong()
    defer { host.stop() }
    try ready(host, ["com.test.one": "started"])
    let pid = host.process.processIdentifier
    kill(pid, SIGSTOP)
    let client = try Background(["list", "--state", state])
    // The client has connected, checked and sent, and waits for the answer in poll.
    let end = Date().addingTimeInterval(30)
    while !Self.waitChannel(client.process.processIdentifier).contains("poll") && Date() < end {
      usleep(20_000)
    }
    #expect(Self.waitChannel(client.process.processIdentifier).contains("poll"), "the client never waited")
    if killed {
      kill(pid, SIGKILL)
      kill(pid, SIGCONT)
    } else {
      kill(pid, SIGCONT)
    }
    let (status, stdout, stderr) = client.wait()
    let r = (status: status, stdout: stdout, stderr: stderr)
    let shown: Comment = "status \(status)\nstdout:\n\(stdout)\nstderr:\n\(stderr)"
    if killed {
      #expect(r.status == 4, shown)
      #expect(r.stderr.contains("the host (pid \(pid)) closed the connection without answering"), shown)
      #expect(!r.stderr.contains("no answer within"), shown)
    } else {
      #expect(r.status == 0, shown)
      #expect(r.stderr.contains("answered by the host running on \(state) (pid \(pid))"), shown)
    }
  }

  // MARK: - Who listens

  /// A listener in C that is not a host: records the pid it is given a file for, accepts,
  /// logs how many bytes each client sent, and answers the Nth client with the Nth answer (the
  /// last one again after that).
  static let fakeListenerSource = #"""
    #include <poll.h>
    #include <signal.h>
    #include <stdio.h>
    #include <string.h>
    #include <sys/socket.h>
    #include <sys/stat.h>
    #include <sys/un.h>
    #include <unistd.h>
    int main(int argc, char **argv) {
      if (argc < 5) return 2;
      signal(SIGPIPE, SIG_IGN);
      const char *path = argv[1], *lock = argv[2], *log = argv[3];
      if (strcmp(lock, "-") != 0) {
        FILE *f = fopen(lock, "w");
        if (!f) return 3;
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
      }
      int fd = socket(AF_UNIX, SOCK_STREAM, 0);
      struct sockaddr_un a;
      memset(&a, 0, sizeof a);
      a.sun_family = AF_UNIX;
      strncpy(a.sun_path, path, sizeof a.sun_path - 1);
      unlink(path);
      if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 16) != 0) return 4;
      chmod(path, 0777);
      FILE *f = fopen(log, "a");
      if (!f) return 5;
      fprintf(f, "listening\n");
      fclose(f);
      for (int n = 0;; n++) {
        int c = accept(fd, NULL, NULL);
        if (c < 0) continue;
        char buffer[65536];
        long total = 0;
        struct pollfd p = {c, POLLIN, 0};
        while (poll(&p, 1, 2000) > 0) {
          long r = read(c, buffer, sizeof buffer);
          if (r <= 0) break;
          total += r;
          if (memchr(buffer, '\n', r)) break;
        }
        f = fopen(log, "a");
        if (f) { fprintf(f, "received %ld\n", total); fclose(f); }
        const char *answer = argv[4 + (n < argc - 5 ? n : argc - 5)];
        if (write(c, answer, strlen(answer)) < 0) {}
        close(c);
      }
    }
    """#

  static func answer(_ outcome: ControlResponse.Outcome) -> String {
    String(decoding: ControlResponse(pid: 1, stateDirectory: "fake", outcome: outcome).line, as: UTF8.self)
  }

  /// A `status` answer whose state directory is `state`.
  static func statusAnswer(_ state: String) -> String {
    answer(.answered(["running": true, "pid": 1, "state": .string(state), "modules": [:]], changes: []))
  }

  static let busyAnswer = answer(
    .failed(ControlFailure(.busy, "the host is busy with other clients; try again")))

  /// The impostor's answer: escape sequences that would recolour (or worse) a terminal.
  static let hostileAnswer = statusAnswer("\u{1b}[31mIMPOSTOR\u{1b}]0;owned\u{07}")

  /// Builds the fake listener (once per test) into `dir`.
  func fakeListener() throws -> String {
    let src = try dir.write("src/fake-listener.c", Self.fakeListenerSource)
    let out = dir.url("fake-listener")
    let r = try ProcessRunner.run("/usr/bin/env", ["cc", "-O1", "-o", out, src])
    try #require(r.status == 0, "cc: \(r.stderr)")
    chmod(out, 0o755)
    return out
  }

  /// Starts the fake listener on `stateDirectory` (as `uid`, through setpriv), writing its pid
  /// to host.lock when `recordPID`; waits until it listens.
  func startFake(
    _ binary: String, stateDirectory: String, log: String, recordPID: Bool, as uid: UInt32? = nil,
    answers: [String]
  ) throws -> Process {
    let p = Process()
    let args =
      [binary, stateDirectory + "/control.sock", recordPID ? stateDirectory + "/host.lock" : "-", log]
      + answers
    if let uid {
      p.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
      p.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--"] + args
    } else {
      p.executableURL = URL(fileURLWithPath: binary)
      p.arguments = Array(args.dropFirst())
    }
    try p.run()
    let end = Date().addingTimeInterval(60)
    while !((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("listening") && Date() < end {
      #expect(p.isRunning, "the fake listener ended: \(p.terminationStatus)")
      usleep(20_000)
    }
    return p
  }

  /// The listener's log lines once it has logged `count` clients.
  func received(_ log: String, count: Int) -> [String] {
    let end = Date().addingTimeInterval(60)
    while Date() < end {
      let lines = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(
        String.init
      ).filter { $0.hasPrefix("received") }
      if lines.count >= count { return lines }
      usleep(20_000)
    }
    return []
  }

  /// uid 65534 plants `DIR/.forsetti/control.sock` (and a host.lock naming itself); root runs a
  /// verb there (issue 26, 4). Refused before anything is sent, with the uid, pid and path;
  /// nothing it says is shown; nothing is approved. The positive control: the same listener as
  /// root, named by host.lock, is trusted, and what it says is shown.
  @Test func anImpostorOfAnotherUserIsRefusedUnread() throws {
    try #require(geteuid() == 0, "planting as another user needs root")
    let fake = try fakeListener()
    chmod(dir.path, 0o755)
    let planted = dir.url("project")
    let forsetti = planted + "/.forsetti"
    try FileManager.default.createDirectory(atPath: forsetti, withIntermediateDirectories: true)
    let chown = try ProcessRunner.run("/bin/chown", ["-R", "65534:65534", planted])
    try #require(chown.status == 0, "\(chown.stderr)")
    let log = planted + "/impostor.log"
    let impostor = try startFake(
      fake, stateDirectory: forsetti, log: log, recordPID: true, as: HostileHost.nobody,
      answers: [Self.hostileAnswer])
    defer {
      kill(impostor.processIdentifier, SIGKILL)
      impostor.waitUntilExit()
    }

    let r = try HostBinary.run(["approve", "com.test.x", "--state", ".forsetti"], in: planted)
    #expect(r.status == 5, shown(r))
    #expect(
      r.stderr.contains("refusing .forsetti/control.sock: it is listened on by uid 65534 (pid "), shown(r))
    #expect(r.stderr.contains("neither root nor you (uid 0)"), shown(r))
    #expect(
      !(r.stdout + r.stderr).contains("IMPOSTOR") && !(r.stdout + r.stderr).contains("\u{1b}"), shown(r))
    #expect(received(log, count: 1) == ["received 0"], "the impostor was sent a request")
    #expect(!FileManager.default.fileExists(atPath: forsetti + "/approvals.json"), "something was approved")

    // Positive control: root listening, as host.lock says, is believed.
    let trusted = dir.url("trusted")
    try FileManager.default.createDirectory(atPath: trusted, withIntermediateDirectories: true)
    let trustedLog = dir.url("trusted.log")
    let root = try startFake(
      fake, stateDirectory: trusted, log: trustedLog, recordPID: true, answers: [Self.hostileAnswer])
    defer {
      kill(root.processIdentifier, SIGKILL)
      root.waitUntilExit()
    }
    let believed = try HostBinary.run(["status", "--state", trusted])
    #expect(believed.status == 0, shown(believed))
    #expect(believed.stdout.contains("IMPOSTOR"), shown(believed))
    #expect(received(trustedLog, count: 1).first != "received 0", "the trusted listener got no request")
  }

  /// The recorded host itself answers forged documents (a host of this build would not): a
  /// `reload` answer missing its reports, one whose line carries escape sequences, an `approve`
  /// answer approving what is no capability, a line cut in the middle. Each is refused naming
  /// the member at fault, or shown by the module-text rule; none is rendered raw, none traps. The
  /// positive control is the well-formed reload answer rendered, neutralised.
  @Test func theRecordedHostsForgedAnswersAreRefusedByMember() throws {
    let fake = try fakeListener()
    let state = dir.url("forged")
    try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
    let escaped = "\u{1b}]0;owned\u{07}reloaded com.x \u{1b}[31m"
    let answers = [
      Self.answer(.answered(["module": "com.x", "reloaded": true], changes: [])),
      Self.answer(
        .answered(
          ReloadAnswer(
            module: "com.x", reloaded: true, reports: [.init(moduleID: "com.x", line: escaped, trace: [])]
          ).json, changes: [])),
      Self.answer(.answered(["moduleID": "com.x", "approved": ["flight"]], changes: [])),
      String(Self.answer(.answered(["module": "com.x"], changes: [])).prefix(20)),
    ]
    let log = dir.url("forged.log")
    let p = try startFake(fake, stateDirectory: state, log: log, recordPID: true, answers: answers)
    defer {
      kill(p.processIdentifier, SIGKILL)
      p.waitUntilExit()
    }
    let missing = try HostBinary.run(["reload", "com.x", "--state", state])
    #expect(missing.status == 2 && missing.stderr.contains("reports"), shown(missing))
    let shownLine = try HostBinary.run(["reload", "com.x", "--state", state])
    #expect(shownLine.status == 0 && shownLine.stdout.contains("reloaded com.x"), shown(shownLine))
    #expect(!(shownLine.stdout + shownLine.stderr).contains("\u{1b}"), shown(shownLine))
    let approved = try HostBinary.run(["approve", "com.x", "--state", state])
    #expect(approved.status == 2 && approved.stderr.contains("approved"), shown(approved))
    #expect(!approved.stdout.contains("approved for"), shown(approved))
    let cut = try HostBinary.run(["reload", "com.x", "--state", state])
    #expect(cut.status != 0 && !cut.stdout.contains("com.x"), shown(cut))
    #expect(received(log, count: 4).count == 4)
  }

  /// The recorded host answers a write with escape sequences in what it says it did, the ID and
  /// the note (a host of this build names the ID it was asked about, which may be anything):
  /// `enable`, `override` and `approve` show them by the module-text rule, never raw. The
  /// positive control is the words themselves, shown.
  @Test func aWritesAnswerIsShownByTheModuleTextRule() throws {
    let fake = try fakeListener()
    let state = dir.url("forged-writes")
    try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
    let esc = "\u{1b}]0;owned\u{07}\u{1b}[2J\u{202e}"
    let answers = [
      Self.answer(
        .answered(ActivationAnswer(state: ActivationState(), done: "enabled com.x\(esc)").json, changes: [])),
      Self.answer(
        .answered(
          OverrideAnswer(
            channel: .module, id: "com.x\(esc)", change: .set(state: "on", changed: true),
            done: "set on\(esc)",
            stored: .init(persisted: "on", windows: [], note: "a note\(esc)")
          ).json, changes: [])),
      Self.answer(.answered(ApprovalAnswer(moduleID: "com.x\(esc)", approved: [.storage]).json, changes: [])),
    ]
    let log = dir.url("forged-writes.log")
    let p = try startFake(fake, stateDirectory: state, log: log, recordPID: true, answers: answers)
    defer {
      kill(p.processIdentifier, SIGKILL)
      p.waitUntilExit()
    }
    for (args, words) in [
      (["enable", "com.x"], "enabled com.x"), (["override", "module", "com.x", "on"], "a note"),
      (["approve", "com.x"], "approved for com.x"),
    ] {
      let r = try HostBinary.run(args + ["--state", state])
      #expect(r.status == 0 && r.stdout.contains(words), shown(r))
      #expect(!(r.stdout + r.stderr).contains("\u{1b}"), shown(r))
      #expect(!(r.stdout + r.stderr).contains("\u{202e}"), shown(r))
    }
    #expect(received(log, count: 3).count == 3)
  }

  /// `upgrade`'s client reads two answers off the socket, the upgrade's and then `status` until
  /// it shows the token: forged ones must neither be shown raw nor claim a success they do not
  /// carry. The recorded host answers with escapes in the executable and version (shown by the
  /// module-text rule), then a status whose image has another token, then one whose `image` is
  /// of the wrong type (refused, asked again), then the matching token (the positive control:
  /// success); and, on a second run, an upgrade answer missing a member (exit 4, not success).
  @Test func upgradesForgedAnswersAreNeitherShownRawNorTakenForSuccess() throws {
    let fake = try fakeListener()
    let state = dir.url("forged-upgrade")
    try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
    let esc = "\u{1b}]0;owned\u{07}\u{202e}"
    func status(_ image: JSONValue) -> String {
      Self.answer(
        .answered(
          ["running": true, "pid": 1, "state": .string(state), "modules": [:], "image": image], changes: []))
    }
    let image: (String) -> JSONValue = { token in
      ["version": .string("9.9.9\(esc)"), "startedAt": 1, "upgrades": 1, "upgradeToken": .string(token)]
    }
    let answers = [
      Self.answer(
        .answered(
          UpgradeAnswer(
            token: "t-1", executable: "/usr/bin/forsetti-host\(esc)", fromVersion: "0.1.0", toVersion: "9.9.9"
          )
          .json, changes: [])),
      status(image("another")),
      status(.string("not an object")),
      status(image("t-1")),
      Self.answer(.answered(["token": "t-2", "executable": "/x"], changes: [])),
    ]
    let log = dir.url("forged-upgrade.log")
    let p = try startFake(fake, stateDirectory: state, log: log, recordPID: true, answers: answers)
    defer {
      kill(p.processIdentifier, SIGKILL)
      p.waitUntilExit()
    }
    let upgraded = try HostBinary.run(["upgrade", "--state", state])
    #expect(upgraded.status == 0 && upgraded.stdout.contains("upgraded: pid 1 now runs"), shown(upgraded))
    #expect(!(upgraded.stdout + upgraded.stderr).contains("\u{1b}"), shown(upgraded))
    #expect(!(upgraded.stdout + upgraded.stderr).contains("\u{202e}"), shown(upgraded))
    let cut = try HostBinary.run(["upgrade", "--state", state])
    #expect(cut.status == 4 && cut.stderr.contains("fromVersion"), shown(cut))
    #expect(!cut.stdout.contains("upgraded"), shown(cut))
    #expect(received(log, count: 5).count == 5)
  }

  /// Root listens, but host.lock names another pid (here pid 1): not the host, refused unread.
  @Test func aListenerThatIsNotTheRecordedHostIsRefused() throws {
    let fake = try fakeListener()
    let other = dir.url("other")
    try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
    let log = dir.url("other.log")
    let p = try startFake(
      fake, stateDirectory: other, log: log, recordPID: false, answers: [Self.hostileAnswer])
    defer {
      kill(p.processIdentifier, SIGKILL)
      p.waitUntilExit()
    }
    try "1\n".write(toFile: other + "/host.lock", atomically: false, encoding: .utf8)
    let r = try HostBinary.run(["list", "--state", other])
    #expect(r.status == 5, shown(r))
    #expect(
      r.stderr.contains(
        "refusing \(other)/control.sock: it is listened on by pid \(p.processIdentifier) (uid \(geteuid())), but \(other)/host.lock names pid 1"
      ), shown(r))
    #expect(!r.stdout.contains("IMPOSTOR"), shown(r))
    #expect(received(log, count: 1) == ["received 0"])

    // No host.lock at all: no host to believe either.
    unlink(other + "/host.lock")
    let none = try HostBinary.run(["list", "--state", other])
    #expect(none.status == 5, shown(none))
    #expect(none.stderr.contains("host.lock names no host"), shown(none))
  }

  // MARK: - Busy

  /// A host that says "busy" is asked again: twice busy, then an answer, is the answer.
  @Test func aBusyHostIsAskedAgain() throws {
    let fake = try fakeListener()
    let busyState = dir.url("busy")
    try FileManager.default.createDirectory(atPath: busyState, withIntermediateDirectories: true)
    let log = dir.url("busy.log")
    let busy = Self.busyAnswer
    let p = try startFake(
      fake, stateDirectory: busyState, log: log, recordPID: true,
      answers: [busy, busy, Self.statusAnswer("served at last")])
    defer {
      kill(p.processIdentifier, SIGKILL)
      p.waitUntilExit()
    }
    let r = try HostBinary.run(["status", "--state", busyState])
    #expect(r.status == 0, shown(r))
    #expect(r.stdout == "running: pid 1, 0 modules started (state directory served at last)\n", shown(r))
    #expect(received(log, count: 3).count == 3)
  }

  /// Busy for good: given up after the retries (about 10 s), exit 4, saying so.
  @Test func aHostBusyForGoodIsGivenUpOn() throws {
    let fake = try fakeListener()
    let busyState = dir.url("busy")
    try FileManager.default.createDirectory(atPath: busyState, withIntermediateDirectories: true)
    let log = dir.url("busy.log")
    let p = try startFake(
      fake, stateDirectory: busyState, log: log, recordPID: true,
      answers: [Self.busyAnswer])
    defer {
      kill(p.processIdentifier, SIGKILL)
      p.waitUntilExit()
    }
    let start = Date()
    let r = try HostBinary.run(["status", "--state", busyState])
    let took = Date().timeIntervalSince(start)
    #expect(r.status == 4, shown(r))
    #expect(r.stderr.contains("stayed busy with other clients for 10.0 s"), shown(r))
    // It did try again, for a while (a lower bound only: a loaded machine makes it longer).
    #expect(took >= 5, "gave up after \(took) s")
    #expect(received(log, count: 3).count >= 3)
  }

  // MARK: - The socket a host removes

  /// A host stopping removes its socket only while the path is still the one it made: a socket
  /// put there since (another host's, after a swap) stays. The positive control: a host whose
  /// socket is untouched removes it.
  @Test func aStoppingHostRemovesOnlyItsOwnSocket() throws {
    try module("com.test.one")
    let first = try launch()
    try ready(first, ["com.test.one": "started"])
    #expect(rename(socket, socket + ".old") == 0)
    let foreign = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(foreign) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
      for (i, b) in Array(socket.utf8).enumerated() { raw[i] = b }
    }
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(foreign, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
      }
    }
    try #require(bound == 0, "bind: errno \(errno)")
    var before = stat()
    #expect(lstat(socket, &before) == 0)
    first.stop()
    var after = stat()
    #expect(lstat(socket, &after) == 0, "the stopping host removed a socket it did not make")
    #expect(after.st_ino == before.st_ino)

    let second = try launch()
    try ready(second, ["com.test.one": "started"])
    second.stop()
    #expect(!FileManager.default.fileExists(atPath: socket), "a host left its own socket behind")
  }
}
