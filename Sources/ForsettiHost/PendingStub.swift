// A stand-in for the facade of issue 29 (branch wip/facade) and the application-service types
// (branch wip/appsvc), so that the C API (Sources/ForsettiEmbed) builds and runs on its own
// branch. It keeps exactly their public contract; at merge the lead replaces this file with the
// real facade. It runs a real LiveHost, but registers no service and calls no module (`call`
// answers FORSETTI_ERR_UNAVAILABLE), and `run` does not catch signals.
import CForsetti
import Dispatch
import ForsettiBinary
import ForsettiCore
import ForsettiRuntime
import Synchronization

/// One call of an application service by a module.
public struct ApplicationServiceCall: Sendable {
  public let moduleID: String
  public let method: String
  public let request: [UInt8]
}

/// An application service's answer: a forsetti status and the response bytes.
public struct ApplicationServiceReply: Sendable {
  public var status: Int32
  public var response: [UInt8]
  public init(status: Int32, response: [UInt8] = []) {
    self.status = status
    self.response = response
  }
}

/// Why an application service cannot be made.
public enum ApplicationServiceError: Error, Sendable, CustomStringConvertible {
  case invalidID(String)
  public var description: String {
    switch self {
    case .invalidID(let id): "'\(id)' is no versioned service ID (reverse DNS ending in .vN)"
    }
  }
}

/// A service the application offers modules behind a capability.
public struct ApplicationService: Sendable {
  public let id: String
  public let capability: Capability
  public let handler: @Sendable (ApplicationServiceCall) -> ApplicationServiceReply
  public init(
    id: String, capability: Capability,
    handler: @escaping @Sendable (ApplicationServiceCall) -> ApplicationServiceReply
  ) throws(ApplicationServiceError) {
    let parts = id.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count >= 3, let last = parts.last, last.hasPrefix("v"), Int(last.dropFirst()) != nil,
      parts.allSatisfy({ !$0.isEmpty })
    else { throw .invalidID(id) }
    self.id = id
    self.capability = capability
    self.handler = handler
  }
}

/// What a module's role answered the application.
public struct ModuleCallReply: Sendable {
  public var status: Int32
  public var response: [UInt8]
}

/// Why the host could not be made, started or asked.
public enum ForsettiHostError: Error, CustomStringConvertible {
  case judge(JudgeError)
  case stateDirectory(String, reason: String)
  case started
  public var description: String {
    switch self {
    case .judge(let e): "\(e)"
    case .stateDirectory(let path, let reason): "state directory \(path): \(reason)"
    case .started: "the host has already started"
    }
  }
}

/// The host as a value (stand-in; see the top of this file).
public final class ForsettiHost {
  /// What the host runs and how.
  public struct Configuration: Sendable {
    public var judging: HostConfiguration
    public var isolation: IsolationSettings?
    public var development: LiveHost.Development?
    public var logLimits: LogLimits
    public var exportDirectory: String?
    public var quotas: ServiceQuotas
    public var logSinks: [any LogSink]
    public var controlSocket: Bool
    public init(manifestsDirectory: String, pluginDirectories: [String], stateDirectory: String) {
      judging = HostConfiguration(
        manifestsDirectory: manifestsDirectory, pluginDirectories: pluginDirectories,
        stateDirectory: stateDirectory)
      isolation = nil
      development = nil
      logLimits = .standard
      exportDirectory = nil
      quotas = .standard
      logSinks = []
      controlSocket = false
    }
  }

  /// How `run` ended.
  public enum Ending: Sendable, Equatable {
    case signal(String), deadline, stopRequested, stateDirectoryReplaced
  }

  private let live: LiveHost
  private let manager: ModuleManager
  private let wakeUp = DispatchSemaphore(value: 0)
  private let stopRequest = Mutex(false)
  private var observers: [@Sendable (HostChange) -> Void] = []
  private var started = false

  public init(_ configuration: Configuration) throws(ForsettiHostError) {
    let environment = HostEnvironment(
      stateDirectory: configuration.judging.stateDirectory, log: FanOutLogSink(configuration.logSinks),
      limits: configuration.logLimits, exportDirectory: configuration.exportDirectory,
      quotas: configuration.quotas)
    manager = ModuleManager(
      environment: environment, mode: configuration.isolation.map { .isolated($0) } ?? .inProcess)
    live = LiveHost(
      judge: Judge(configuration.judging), manager: manager, development: configuration.development,
      wake: { [wakeUp] in wakeUp.signal() })
  }

  /// Adds a service modules may resolve (the stub keeps none).
  public func register(_ service: ApplicationService) throws(ForsettiHostError) {
    if started { throw .started }
  }

  /// Calls `observer` on the host's thread after each change.
  public func observe(_ observer: @escaping @Sendable (HostChange) -> Void) {
    observers.append(observer)
    let all = observers
    live.onChange = { change in for o in all { o(change) } }
  }

  /// Judges and starts what may run.
  public func start() throws(ForsettiHostError) {
    if started { throw .started }
    do { try live.start() } catch { throw .judge(error) }
    started = true
  }

  /// Every module's record now.
  public var modules: [ModuleRecord] { manager.records }

  /// Calls a module's role (the stub calls none).
  public func call(role: DefaultModuleRole, method: String, request: [UInt8]) -> ModuleCallReply {
    ModuleCallReply(status: FORSETTI_ERR_UNAVAILABLE, response: [])
  }

  /// Converges on changes until `deadline` or `requestStop`.
  public func run(until deadline: ContinuousClock.Instant? = nil, handlingSignals: Bool = true) -> Ending {
    while true {
      if stopRequest.withLock({ v in
        defer { v = false }; return v
      }) {
        return .stopRequested
      }
      let now = ContinuousClock.now
      if let deadline, now >= deadline { return .deadline }
      let until = [deadline, live.nextDue].compactMap { $0 }.min()
      if let until {
        let seconds = min(max(0, now.duration(to: until) / .seconds(1)), 1)
        _ = wakeUp.wait(timeout: .now() + seconds)
      } else {
        wakeUp.wait()
      }
      live.process()
    }
  }

  /// When `process` is next due without a wake-up.
  public var nextDue: ContinuousClock.Instant? { live.nextDue }

  /// Handles what happened since the last call.
  public func process() { live.process() }

  /// Ends `run` soon; any thread.
  public func requestStop() {
    stopRequest.withLock { $0 = true }
    wakeUp.signal()
  }

  /// Stops every module.
  public func stop() { live.stop() }
}
