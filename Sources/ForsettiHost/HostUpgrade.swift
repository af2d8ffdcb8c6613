import ForsettiBridge
import ForsettiCore
import ForsettiRuntime
import FoundationEssentials
import Glibc

/// The host's side of `upgrade`: it becomes the executable now at its path in this same
/// process, keeping its pid, its state directory, its `host.lock`, its listening control
/// socket (connections made meanwhile wait in its backlog and the new image answers them) and
/// every running module's worker (`WorkerHandoff`: the workers are this process's children and
/// stay so; the host's ends of their channels are descriptors kept across the exec).
/// In two steps on the host's thread: `prepare` answers the request — the preflight of the new
/// executable passed, or why not — and `handOver`, after the answers of that round were
/// served, quiesces the control socket, parks the threads serving workers, gathers the workers
/// and execs. A refusal or a failed exec leaves this image running as it was.
final class HostUpgrade {
  private let arguments: [String]
  private let hold: StateDirectoryHold
  private let lockFD: Int32
  /// What this image is, fixed when it started (`origin(handedOver:)`).
  let origin: StatusAnswer.Image
  private var failure: String?
  private var prepared: (handover: Handover, memfd: Int32)?

  /// The longest the answers being sent may take before the exec (a client that reads slowly).
  static let quiesceWithin = 5.0

  init(arguments: [String], hold: StateDirectoryHold, lockFD: Int32, origin: StatusAnswer.Image) {
    self.arguments = arguments
    self.hold = hold
    self.lockFD = lockFD
    self.origin = origin
  }

  /// What an image starting now is: its version, when the host started and how many upgrades
  /// it went through — from `handedOver`, the previous image's handover, when this one took
  /// the host over (now being the time of that upgrade), else from now. Made once, when the
  /// host starts: `status` (`image`) and `/metrics` both say it.
  static func origin(handedOver: Handover?) -> StatusAnswer.Image {
    let now = Int64(time(nil))
    return StatusAnswer.Image(
      version: ForsettiVersion.current.description, startedAt: handedOver?.startedAt ?? now,
      upgrades: handedOver?.upgrades ?? 0, upgradeToken: handedOver?.token,
      upgradedAt: handedOver == nil ? nil : now)
  }

  /// What `status` says of this image: its origin, and why the last upgrade asked of it did not
  /// happen, if one did not.
  var image: StatusAnswer.Image {
    var i = origin
    i.upgradeFailure = failure
    return i
  }

  /// Refuses the upgrade, or prepares it: the document written and the new executable's
  /// preflight passed. `refusal` is why this host cannot be handed over now, if it cannot.
  func prepare(refusal: String?, server: ControlServer?) throws(ControlFailure) -> UpgradeAnswer {
    guard prepared == nil else { throw ControlFailure(.refused, "an upgrade is already under way") }
    if let refusal {
      throw ControlFailure(.refused, "upgrade refused, this host goes on as it was: \(refusal)")
    }
    guard let executable = ImageExec.path else {
      throw ControlFailure(.failed, "this host cannot tell which executable it runs (/proc/self/exe)")
    }
    let handover = Handover(
      token: Self.token(), fromVersion: ForsettiVersion.current.description, executable: executable,
      stateDirectory: hold.path, holdFD: hold.fd, lockFD: lockFD, controlFD: server?.listeningDescriptor,
      startedAt: origin.startedAt, upgrades: origin.upgrades + 1)
    let memfd: Int32
    switch handover.memfd() {
    case .failure(let why): throw ControlFailure(.failed, "the handover cannot be written: \(why)")
    case .success(let fd): memfd = fd
    }
    switch UpgradePreflight.run(executable, memfd: memfd, arguments: arguments) {
    case .failure(let why):
      close(memfd)
      failure = "\(handover.token): \(why)"
      throw ControlFailure(.refused, "upgrade refused, this host goes on as it was: \(why)")
    case .success(let version):
      failure = nil
      prepared = (handover, memfd)
      return UpgradeAnswer(
        token: handover.token, executable: executable, fromVersion: handover.fromVersion, toVersion: version)
    }
  }

  /// Hands over when an upgrade was prepared: returns only when it did not happen, this image
  /// then going on (`resume` is called to restart what `release` ended, given the `/metrics`
  /// socket `release` kept). `stopping` says whether
  /// a stop came (SIGTERM, `requestStop`), which abandons the handover, looked at once the
  /// control socket is quiet. Then `release` ends the idle workers and quiesces `/metrics`,
  /// keeping its listening socket (handed over), `loop` is paused (no worker's
  /// frame or host call is left half handled) and `workers` gathers the running modules'
  /// workers — those started by requests answered in this same round included.
  func handOver(
    server: ControlServer?, loop: WorkerLoop,
    workers: () -> Result<HandedModules, WorkerHandoffRefusal>,
    overrides: () -> InMemoryOverrides.Tables,
    stopping: () -> Bool, log: (LogLevel, String) -> Void, release: () -> Int32?, resume: (Int32?) -> Void
  ) {
    guard let (prepared, checked) = prepared else { return }
    self.prepared = nil
    // The preflight's document; the one handed over names the workers as they are at the exec.
    close(checked)
    // The `/metrics` socket, once kept: handed over, or served again if the upgrade stops here.
    var metrics: Int32?
    func abandon(_ why: String, resuming: Bool = false) {
      if resuming { resume(metrics) }
      server?.resume()
      failure = "\(prepared.token): \(why)"
      log(.warning, "upgrade abandoned, this host goes on as it was: \(why)")
    }
    if let server, !server.quiesce(within: Self.quiesceWithin) {
      abandon("an answer was still being sent after \(Self.quiesceWithin) s")
      return
    }
    guard !stopping() else {
      abandon("a stop came first")
      return
    }
    metrics = release()
    guard loop.pause(within: Self.quiesceWithin) else {
      abandon("a module's host call was still being answered after \(Self.quiesceWithin) s", resuming: true)
      return
    }
    var handover = prepared
    handover.metricsFD = metrics
    (handover.overriddenModules, handover.overriddenProducts) = overrides()
    switch workers() {
    case .failure(let refusal):
      loop.resume()
      abandon("\(refusal)", resuming: true)
      return
    case .success(let handed):
      handover.workers = handed.workers
      handover.channels = handed.channels
      handover.restarts = handed.restarts
    }
    let memfd: Int32
    switch handover.memfd() {
    case .failure(let why):
      loop.resume()
      abandon("the handover cannot be written: \(why)", resuming: true)
      return
    case .success(let fd): memfd = fd
    }
    defer { close(memfd) }
    log(
      .info,
      "upgrade: handing over \(handover.workers.count) running module\(handover.workers.count == 1 ? "" : "s") to \(handover.executable) (token \(handover.token))"
    )
    let e = ImageExec.exec(
      handover.executable, arguments: arguments, setting: [Handover.environmentVariable: String(memfd)],
      keep: handover.descriptors + [memfd])
    failure =
      "\(handover.token): \(handover.executable) could not be executed: \(String(cString: strerror(e)))"
    log(.error, "upgrade failed, this host goes on as it was: \(failure ?? "")")
    loop.resume()
    resume(metrics)
    server?.resume()
  }

  /// 128 random bits in hex.
  static func token() -> String {
    (0..<2).map { _ in String(UInt64.random(in: 0...UInt64.max), radix: 16) }.joined(separator: "-")
  }
}
