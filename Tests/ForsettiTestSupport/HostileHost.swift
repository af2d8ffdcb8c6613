import Foundation

/// A real `forsetti-host run` over hostile fixture modules, as root or as an unprivileged user:
/// lays out manifests/, plugins/ and state/ in a temporary directory, runs the built host, and
/// while it runs lets the test look at the host process from outside.
public final class HostileHost: Sendable {
  /// Who the host runs as.
  public enum Identity: String, Sendable, CaseIterable, CustomStringConvertible {
    /// The user running the tests (root here and in CI).
    case current
    /// uid/gid 65534 through `setpriv`, when the tests run as root.
    case unprivileged

    public var description: String { rawValue }
  }

  /// The user and group an unprivileged host runs as.
  public static let nobody: UInt32 = 65534

  public let dir: TemporaryDirectory
  public let identity: Identity

  public init(_ identity: Identity) {
    self.identity = identity
    dir = TemporaryDirectory("hostile-\(identity)")
    // The unprivileged host must be able to traverse to its state from the start.
    chmod(dir.path, 0o755)
  }

  /// Whether this identity can be tried here: running as another user needs root.
  public var isAvailable: Bool { identity == .current || geteuid() == 0 }

  /// Compiles `fixture` into plugins/ with its manifest in manifests/ (with _GNU_SOURCE, so that
  /// a hostile fixture has every call glibc declares).
  public func install(_ fixture: ModuleFixture, capabilities: [String] = []) throws {
    try fixture.install(in: dir, capabilities: capabilities, ccFlags: ["-D_GNU_SOURCE"])
  }

  /// A one-shot `forsetti-host` command run as this host's user, as an operator would ask it: a
  /// CLI believes only a host of root or of its own uid (docs/control.md), so root asks an
  /// unprivileged host as that user.
  public func cli(_ arguments: [String], in directory: String? = nil) throws -> ProcessResult {
    guard identity == .unprivileged else { return try HostBinary.run(arguments, in: directory) }
    return try ProcessRunner.run(
      "/usr/bin/setpriv",
      ["--reuid=\(Self.nobody)", "--regid=\(Self.nobody)", "--clear-groups", "--", HostBinary.forOtherUsers]
        + arguments,
      in: directory)
  }

  /// The sandbox directory of `moduleID` under state/.
  public func sandbox(_ moduleID: String) -> String { dir.url("state/sandboxes/\(moduleID)") }

  /// What a run left behind.
  public struct Run: Sendable {
    public var status: Int32
    /// Standard output: the log, or with `--json` the report.
    public var stdout: String
    public var stderr: String
    /// Both, as a reader of the terminal would see them.
    public var output: String { stdout + stderr }
    /// What `observe` returned while the host ran, or nil when `ready` never held.
    public var observed: [String: String]?
    /// The host did not stop by itself within a minute of `--for` and was killed.
    public var killedByWatchdog = false

    /// The messages `moduleID` logged, in order.
    public func lines(_ moduleID: String) -> [String] {
      let prefix = "[module=\(moduleID)] "
      return output.split(separator: "\n").compactMap { line in
        line.range(of: prefix).map { String(line[$0.upperBound...]) }
      }
    }

    /// The host's own lines.
    public var hostLines: [String] {
      output.split(separator: "\n").map(String.init).filter { $0.contains("[host]") }
    }
  }

  /// Runs `forsetti-host run --for seconds`. Once `ready` holds (polled while the host runs), calls
  /// `observe` with the host's pid, so the test can look at the live host from outside.
  /// `environment` is added to the host's (the test runner's) environment. With `stopWhen`, the
  /// host is sent SIGTERM as soon as its output so far satisfies it: `seconds` is then only an
  /// upper bound, and the test waits on the event rather than a time.
  public func run(
    for seconds: Double, extraArguments: [String] = [], environment: [String: String] = [:],
    executable hostExecutable: String? = nil,
    ready: @escaping @Sendable () -> Bool = { false },
    observe: @escaping @Sendable (Int32) -> [String: String] = { _ in [:] },
    stopWhen: (@Sendable (String) -> Bool)? = nil
  ) throws -> Run {
    let host = hostExecutable ?? HostBinary.path
    var executable = host
    var arguments =
      [
        "run", "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state",
        dir.url("state"), "--approve-all", "--for", String(seconds),
      ] + extraArguments
    try FileManager.default.createDirectory(atPath: dir.url("state"), withIntermediateDirectories: true)
    if identity == .unprivileged {
      let chown = try ProcessRunner.run("/bin/chown", ["-R", "\(Self.nobody):\(Self.nobody)", dir.path])
      guard chown.status == 0 else { throw HostileHostError.setup("chown: \(chown.stderr)") }
      executable = "/usr/bin/setpriv"
      arguments =
        [
          "--reuid=\(Self.nobody)", "--regid=\(Self.nobody)", "--clear-groups", "--",
          hostExecutable ?? HostBinary.forOtherUsers,
        ]
        + arguments
    }
    // Output to files, not pipes: nothing can block on a full pipe while the test looks on.
    let outPath = dir.url("host-output.txt")
    let errPath = dir.url("host-errors.txt")
    guard FileManager.default.createFile(atPath: outPath, contents: nil),
      FileManager.default.createFile(atPath: errPath, contents: nil),
      let out = FileHandle(forWritingAtPath: outPath), let err = FileHandle(forWritingAtPath: errPath)
    else {
      throw HostileHostError.setup("no output file")
    }
    let p = Process()
    p.executableURL = URL(fileURLWithPath: executable)
    p.arguments = arguments
    p.standardOutput = out
    p.standardError = err
    p.standardInput = FileHandle.nullDevice
    if !environment.isEmpty {
      p.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
    }
    try p.run()
    var observed: [String: String]?
    // A host that does not stop by itself is a finding, not a test that hangs: it is killed a
    // generous minute after it should have stopped, and the run says so.
    let watchdog = Date().addingTimeInterval(seconds + 60)
    var killedByWatchdog = false
    var stopped = false
    var looked = Date()
    while p.isRunning {
      if let stopWhen, !stopped, Date().timeIntervalSince(looked) > 0.25 {
        looked = Date()
        let so = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
        let se = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
        if stopWhen(so + se) {
          kill(p.processIdentifier, SIGTERM)
          stopped = true
        }
      }
      if observed == nil && ready() {
        observed = observe(p.processIdentifier)
      }
      if !killedByWatchdog, Date() > watchdog {
        kill(p.processIdentifier, SIGKILL)
        killedByWatchdog = true
      }
      usleep(20_000)
    }
    p.waitUntilExit()
    try out.close()
    try err.close()
    let stdout = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
    let stderr = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
    return Run(
      status: p.terminationStatus, stdout: stdout, stderr: stderr, observed: observed,
      killedByWatchdog: killedByWatchdog)
  }
}

/// The harness could not lay out or start a run.
public enum HostileHostError: Error, Sendable, CustomStringConvertible {
  case setup(String)
  public var description: String {
    switch self {
    case .setup(let why): "hostile host setup: \(why)"
    }
  }
}

/// What `/proc` says of a live process: its nice value, CPUs and limits, for a test to compare.
public enum ProcessFacts {
  /// nice, Cpus_allowed_list, and the soft limits of open files and CPU time of `pid`.
  public static func of(_ pid: Int32) -> [String: String] {
    var facts: [String: String] = [:]
    if let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
      let close = stat.lastIndex(of: ")")
    {
      // Fields after "comm)": state is field 3, nice is field 19.
      let rest = stat[stat.index(after: close)...].split(separator: " ")
      if rest.count > 16 { facts["nice"] = String(rest[16]) }
    }
    if let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) {
      for line in status.split(separator: "\n") where line.hasPrefix("Cpus_allowed_list:") {
        facts["cpus"] = line.dropFirst("Cpus_allowed_list:".count).trimmingCharacters(in: .whitespaces)
      }
    }
    if let limits = try? String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8) {
      for line in limits.split(separator: "\n") {
        let cols = line.split(separator: " ", omittingEmptySubsequences: true)
        if line.hasPrefix("Max open files"), cols.count > 3 { facts["openFiles"] = String(cols[3]) }
        if line.hasPrefix("Max cpu time"), cols.count > 3 { facts["cpuSeconds"] = String(cols[3]) }
      }
    }
    return facts
  }
}
