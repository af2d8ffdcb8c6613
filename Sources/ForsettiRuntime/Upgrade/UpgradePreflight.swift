import CForsettiSys
import FoundationEssentials
import Glibc

/// Asks the executable an upgrade would become whether it can take this host over, before the
/// host gives anything up: it is run as `EXECUTABLE upgrade-preflight` with the handover
/// document on descriptor 3 and must say `ready VERSION` and exit 0 within `deadline`. A file that
/// is not a host, one that exits or hangs, or one that reads another handover format is refused
/// here, and the running host goes on as it was.
package enum UpgradePreflight {
  /// What the preflight came to.
  package enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
    case spawn(path: String, errno: Int32)
    case exited(path: String, status: Int32, said: String)
    case killed(path: String, signal: Int32)
    case timedOut(path: String, seconds: Double)
    case notReady(path: String, said: String)

    package var description: String {
      switch self {
      case .spawn(let p, let e): "\(p) cannot be run: \(String(cString: strerror(e)))"
      case .exited(let p, let s, let said):
        "\(p) refused to take this host over (exit status \(s))\(said.isEmpty ? "" : ": \(said)")"
      case .killed(let p, let s): "\(p) was killed by signal \(s) before it said it was ready"
      case .timedOut(let p, let s): "\(p) did not say it was ready within \(s) s"
      case .notReady(let p, let said): "\(p) did not say it was ready (it said: \(said))"
      }
    }
  }

  /// The number the document is on in the preflight process.
  package static let documentFD: Int32 = 3
  /// The most of the preflight's output kept (what it said, for the refusal).
  static let keptOutput = 4096

  /// Runs the preflight of `executable` on the document in `memfd`; the version it said. With
  /// `arguments` (the host's command line, argv[0] first), it is also run as the host would be
  /// started, with `--print-config`, which checks every option and host.conf line as the new
  /// image will: a setting the new version refuses refuses the upgrade, instead of stopping
  /// the host after the exec.
  package static func run(
    _ executable: String, memfd: Int32, arguments: [String]? = nil, deadline: Double = 10
  ) -> Result<String, Failure> {
    var environment = ProcessInfo.processInfo.environment
    environment[Handover.environmentVariable] = String(documentFD)
    let ready: String
    switch spawn(
      executable, ["upgrade-preflight"], environment: environment, document: memfd, deadline: deadline)
    {
    case .failure(let f): return .failure(f)
    case .success(let lines):
      guard let line = lines.last(where: { $0.hasPrefix("ready ") }) else {
        return .failure(.notReady(path: executable, said: LogRecord.streamSafe(lines.last ?? "")))
      }
      ready = String(line.dropFirst("ready ".count))
    }
    if let arguments {
      environment[Handover.environmentVariable] = nil
      let check = Array(arguments.dropFirst()) + ["--print-config"]
      if case .failure(let f) = spawn(
        executable, check, environment: environment, document: nil, deadline: deadline)
      {
        return .failure(f)
      }
    }
    return .success(ready)
  }

  /// Runs `executable ARGUMENTS` (the document on descriptor 3, if any) and waits for it: its
  /// output's lines when it exits 0 within `deadline`.
  private static func spawn(
    _ executable: String, _ arguments: [String], environment: [String: String], document: Int32?,
    deadline: Double
  ) -> Result<[String], Failure> {
    var out: [Int32] = [-1, -1]
    guard forsetti_pipe_cloexec(&out) == 0 else { return .failure(.spawn(path: executable, errno: errno)) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_adddup2(&actions, out[1], 1)
    posix_spawn_file_actions_adddup2(&actions, out[1], 2)
    if let document { posix_spawn_file_actions_adddup2(&actions, document, documentFD) }
    _ = forsetti_spawn_close_from(&actions, documentFD + 1)
    var argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
    defer { for a in argv { free(a) } }
    var envp = ImageExec.environ(environment)
    defer { for e in envp { free(e) } }
    var child: pid_t = 0
    let rc = posix_spawn(&child, executable, &actions, nil, &argv, &envp)
    close(out[1])
    defer { close(out[0]) }
    guard rc == 0 else { return .failure(.spawn(path: executable, errno: rc)) }

    // Its output until it closes it, or the deadline; then its exit.
    var said: [UInt8] = []
    let end = ContinuousClock.now + .milliseconds(Int64(deadline * 1000))
    var open = true
    while open && ContinuousClock.now < end {
      var p = pollfd(fd: out[0], events: Int16(POLLIN), revents: 0)
      guard poll(&p, 1, 100) >= 0 || errno == EINTR else { break }
      guard p.revents != 0 else { continue }
      var chunk = [UInt8](repeating: 0, count: 1024)
      let n = chunk.withUnsafeMutableBytes { read(out[0], $0.baseAddress, $0.count) }
      if n < 0 && errno == EINTR { continue }
      if n <= 0 { open = false } else { said = Array((said + chunk[0..<n]).suffix(keptOutput)) }
    }
    var status: Int32 = 0
    // Its output closed: it is exiting; waited for, not for ever.
    var reaped = false
    while !open && !reaped && ContinuousClock.now < end {
      let r = waitpid(child, &status, WNOHANG)
      reaped = r == child || (r < 0 && errno != EINTR)
      if !reaped { usleep(2000) }
    }
    if !reaped {
      kill(child, SIGKILL)
      while waitpid(child, &status, 0) < 0 && errno == EINTR {}
      return .failure(.timedOut(path: executable, seconds: deadline))
    }
    let lines = String(decoding: said, as: UTF8.self).split(separator: "\n").map(String.init)
    let code = (status >> 8) & 0xff
    let signal = status & 0x7f
    if signal != 0 { return .failure(.killed(path: executable, signal: signal)) }
    guard code == 0 else {
      // The line that says why: the last error line, else the last line.
      let why = lines.last { $0.contains("error:") } ?? lines.last ?? ""
      return .failure(.exited(path: executable, status: code, said: LogRecord.streamSafe(why)))
    }
    return .success(lines)
  }
}
