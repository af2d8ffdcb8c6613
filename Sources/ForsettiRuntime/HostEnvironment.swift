import ForsettiBridge
import ForsettiCore
import FoundationEssentials
import Glibc
import Synchronization

/// What all modules of one host share: the state directory, the log, the event bus, the
/// message router and the telemetry recorder.
package final class HostEnvironment: Sendable {
  package let stateDirectory: String
  /// Where every line goes: the host's own lines as they are, each module's lines within its
  /// rate limit (`limits`), with a line counting what was dropped.
  package let log: any LogSink
  package let events: EventBus
  package let messages: MessageRouter
  package let telemetry: TelemetryRecorder?
  /// The rate limits and rotation in force.
  package let limits: LogLimits
  /// The per-module buckets behind `log` and `telemetry`.
  package let limiter: ModuleRateLimiter
  /// The services of ABI 1.1 and 1.2: secure storage, crypto, file export, diagnostics, roles,
  /// and the application's own.
  package let services: HostServices
  /// The threads that serve every worker of this host (their sockets, call rings and output);
  /// ended with the environment, which outlives every worker.
  package let loop: WorkerLoop
  /// The counters behind `/metrics` (`--metrics`), kept whether or not anything serves them.
  package let metrics = HostMetrics()
  /// Modules serving modules between workers: every role channel, the calls in flight, the
  /// cycle and hung verdicts.
  let roleChannels = RoleChannels()

  /// `exportDirectory` is where modules export files (`--export-dir`; nil for none), each in
  /// its own subdirectory; `quotas` bound what each module stores and exports. `log`
  /// receives what passes the limits; `limits` also sets the rotation of
  /// `logs/telemetry.jsonl` (the sink for `host.log` is made by the caller, see `FileLogSink`).
  /// `applicationServices` are the embedding application's own, offered to modules; `loop`
  /// serves the workers.
  package init(
    stateDirectory: String, log: any LogSink, limits: LogLimits = .standard, exportDirectory: String? = nil,
    quotas: ServiceQuotas = .standard, applicationServices: ApplicationServices = ApplicationServices(),
    loop: WorkerLoop = WorkerLoop()
  ) {
    self.stateDirectory = stateDirectory
    self.loop = loop
    self.limits = limits
    let metrics = metrics
    limiter = ModuleRateLimiter(
      limits: limits,
      dropped: { id, channel in
        let c = metrics.module(id)
        if channel == .log {
          c.droppedLogLines.add(1, ordering: .relaxed)
        } else {
          c.droppedTelemetryEvents.add(1, ordering: .relaxed)
        }
      }
    ) { log.write($0) }
    self.log = RateLimitedLogSink(log, limiter: limiter)
    // Refusals are the host's own lines: never rate-limited away.
    services = HostServices(
      stateDirectory: stateDirectory, exportDirectory: exportDirectory, quotas: quotas, log: log,
      applications: applicationServices)
    events = EventBus()
    messages = MessageRouter()
    telemetry = TelemetryRecorder(
      path: PathText.join(stateDirectory, "logs/telemetry.jsonl"),
      rotation: limits.rotation, limiter: limiter)
  }

  /// Counts of dropped lines still held are written before the host's log goes away.
  deinit {
    limiter.flush()
    loop.shutdown()
  }

  /// `sandboxes/<moduleID>/` beneath the state directory, as an absolute path.
  package func sandboxPath(for moduleID: String) -> String {
    if let known = sandboxPaths.withLock({ $0[moduleID] }) { return known }
    let base = PathText.join(stateDirectory, "sandboxes/\(moduleID)")
    let path = URL(fileURLWithPath: base).standardizedFileURL.path
    sandboxPaths.withLock { $0[moduleID] = path }
    return path
  }

  /// Each module's sandbox path, made once: Foundation's standardising showed in every reload.
  private let sandboxPaths = Mutex<[String: String]>([:])

  /// A line of the host's own (never rate-limited).
  package func hostLog(
    _ level: LogLevel, _ message: String, _ metadata: [String: String] = [:], subject: String? = nil,
    file: String = #fileID, line: Int = #line, function: String = #function
  ) {
    var record = LogRecord(
      level: level, moduleID: nil, message: message, metadata: metadata, file: file, line: line,
      function: function)
    record.subject = subject
    log.write(record)
  }

  /// The host's own line about a module (a crash, a refusal): never rate-limited.
  func hostLog(
    _ level: LogLevel, about moduleID: String?, _ message: String, _ metadata: [String: String] = [:],
    reason: ReasonCode? = nil, file: String = #fileID, line: Int = #line, function: String = #function
  ) {
    log.write(
      LogRecord(
        level: level, moduleID: moduleID, message: message, metadata: metadata, origin: .host, reason: reason,
        file: file, line: line, function: function))
  }
}
