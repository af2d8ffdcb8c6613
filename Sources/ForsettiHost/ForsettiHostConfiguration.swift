import ForsettiCore
import ForsettiRuntime

extension ForsettiHost {
  /// Everything a host is told before it starts: what it judges (`judging`), where modules run,
  /// the limits of their logs and stores, where its lines go, and whether it answers its control
  /// socket. The defaults are `run`'s: isolated workers, standard limits, a control socket.
  public struct Configuration: Sendable {
    /// The gate stack's inputs: manifests, plugin directories, state directory, capability
    /// policy, entitlement source, approvals.
    public var judging: HostConfiguration
    /// Worker executable and limits; nil loads modules into this process (no confinement).
    public var isolation: IsolationSettings?
    /// `dev`'s hot reload; nil for `run`.
    public var development: DevelopmentSettings?
    public var logLimits: LogLimits
    /// Where modules granted `file_export` write (each under its module ID); nil: nowhere.
    public var exportDirectory: String?
    public var quotas: ServiceQuotas
    /// Where the host's and modules' lines go besides `STATE/logs/host.log`.
    public var logSinks: [any LogSink]
    /// Whether the host makes `STATE/control.sock` and answers it (docs/control.md), from its
    /// own state: the command line's verbs and the debug page are its clients.
    public var controlSocket: Bool
    /// The caller ID a module sees when the application calls it (`call`).
    public var applicationID: String
    /// Whether SIGINT and SIGTERM are the host's from the beginning of `start` (a signal while
    /// modules start is kept for `run`), rather than only once `run(handlingSignals: true)` runs.
    public var catchesSignalsAtStart: Bool
    /// The threads that serve every worker (`WorkerLoop`): `base` always, up to `max` only
    /// while handlers block. However many modules run, the host's threads stay within these.
    public var servingThreads: (base: Int, max: Int)
    /// Where to serve `GET /metrics` (Prometheus text format; no authentication, so loopback
    /// unless the operator chooses otherwise); nil: not served. The counters are kept anyway.
    public var metricsAddress: MetricsAddress?
    /// The arguments (argv[0] first) the executable at this host's path is started with when
    /// it takes the host over (`upgrade`); nil: this host does not upgrade itself (an embedded
    /// one declines; `run` and `dev` set it).
    package var upgradeArguments: [String]? = nil
    /// Why `upgrade` is refused whatever runs, if it is: something of the command line's that a
    /// new image would not keep (the debug page's address and token).
    package var upgradeRefusal: String? = nil
    /// What an image of this process handed this one (`upgrade`); nil at a first start.
    package var handover: Handover? = nil
    /// Whether the host watches its manifests, plugins and trust files for changes (inotify).
    /// `run --for 0` does not: it stops before a change could matter, and a watch costs the
    /// kernel a grace period to remove when the host exits (about 15 ms of `run --for 0`).
    package var watchesChanges = true

    /// A configuration with `run`'s defaults: modules isolated in `forsetti-worker` beside this
    /// executable (or under `PREFIX/libexec/forsetti/`), approvals required, no paid product
    /// unlocked, a control socket that refuses every request.
    public init(manifestsDirectory: String, pluginDirectories: [String], stateDirectory: String) {
      judging = HostConfiguration(
        manifestsDirectory: manifestsDirectory, pluginDirectories: pluginDirectories,
        stateDirectory: stateDirectory)
      isolation = IsolationSettings(workerExecutable: IsolationSettings.defaultWorker)
      development = nil
      logLimits = .standard
      exportDirectory = nil
      quotas = .standard
      logSinks = []
      controlSocket = true
      applicationID = "application"
      catchesSignalsAtStart = false
      servingThreads = (WorkerLoop.defaultBase, WorkerLoop.defaultMax)
      metricsAddress = nil
    }
  }
}
