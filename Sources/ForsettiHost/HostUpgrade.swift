import ForsettiBridge
import ForsettiCore
import ForsettiRuntime
import FoundationEssentials
import Glibc

/// The host's side of `upgrade`: it becomes the executable now at its path in this same
/// process, keeping its pid, its state directory, its `host.lock` and its listening control
/// socket (connections made meanwhile wait in its backlog and the new image answers them).
/// In two steps on the host's thread: `prepare` answers the request — the preflight of the new
/// executable passed, or why not — and `handOver`, after the answers of that round were
/// served, quiesces the control socket and execs. A refusal or a failed exec leaves this image
/// running as it was.
///
/// This version hands over no module: with any running, the upgrade is refused (its workers'
/// channels are not yet handed over, issue 43).
final class HostUpgrade {
  private let arguments: [String]
  private let hold: StateDirectoryHold
  private let lockFD: Int32
  private let startedAt: Int64
  private let upgrades: Int
  private let lastToken: String?
  private var failure: String?
  private var prepared: (handover: Handover, memfd: Int32)?

  /// The longest the answers being sent may take before the exec (a client that reads slowly).
  static let quiesceWithin = 5.0

  init(arguments: [String], hold: StateDirectoryHold, lockFD: Int32, handedOver: Handover?) {
    self.arguments = arguments
    self.hold = hold
    self.lockFD = lockFD
    startedAt = handedOver?.startedAt ?? Int64(time(nil))
    upgrades = handedOver?.upgrades ?? 0
    lastToken = handedOver?.token
  }

  /// What `status` says of this image.
  var image: StatusAnswer.Image {
    StatusAnswer.Image(
      version: ForsettiVersion.current.description, startedAt: startedAt, upgrades: upgrades,
      upgradeToken: lastToken, upgradeFailure: failure)
  }

  /// Refuses the upgrade, or prepares it: the document written and the new executable's
  /// preflight passed. `running` are the modules that run now.
  func prepare(running: [String], server: ControlServer?) throws(ControlFailure) -> UpgradeAnswer {
    guard prepared == nil else { throw ControlFailure(.refused, "an upgrade is already under way") }
    guard running.isEmpty else {
      let shown = running.prefix(5).joined(separator: ", ") + (running.count > 5 ? ", …" : "")
      throw ControlFailure(
        .refused,
        "\(running.count) module\(running.count == 1 ? "" : "s") run\(running.count == 1 ? "s" : "") (\(shown)): this host hands over no running module yet; stop them first, or restart the host"
      )
    }
    guard let executable = ImageExec.path else {
      throw ControlFailure(.failed, "this host cannot tell which executable it runs (/proc/self/exe)")
    }
    let handover = Handover(
      token: Self.token(), fromVersion: ForsettiVersion.current.description, executable: executable,
      stateDirectory: hold.path, holdFD: hold.fd, lockFD: lockFD, controlFD: server?.listeningDescriptor,
      startedAt: startedAt, upgrades: upgrades + 1)
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
  /// then going on (`resume` is called to restart what `release` ended). `running` are the
  /// modules that run now and `stopping` whether a stop came (SIGTERM, `requestStop`): either
  /// abandons the handover, looked at last, after the control socket is quiet.
  func handOver(
    server: ControlServer?, running: () -> [String], stopping: () -> Bool, log: (LogLevel, String) -> Void,
    release: () -> Void, resume: () -> Void
  ) {
    guard let (handover, memfd) = prepared else { return }
    prepared = nil
    defer { close(memfd) }
    func abandon(_ why: String) {
      server?.resume()
      failure = "\(handover.token): \(why)"
      log(.warning, "upgrade abandoned, this host goes on as it was: \(why)")
    }
    if let server, !server.quiesce(within: Self.quiesceWithin) {
      abandon("an answer was still being sent after \(Self.quiesceWithin) s")
      return
    }
    // Requests answered after `upgrade` in the same round may have started a module.
    let now = running()
    guard now.isEmpty else {
      abandon("\(now.joined(separator: ", ")) started meanwhile; this host hands over no running module yet")
      return
    }
    guard !stopping() else {
      abandon("a stop came first")
      return
    }
    log(.info, "upgrade: handing over to \(handover.executable) (token \(handover.token))")
    release()
    let keep = [handover.holdFD, handover.lockFD, memfd] + (handover.controlFD.map { [$0] } ?? [])
    let e = ImageExec.exec(
      handover.executable, arguments: arguments, setting: [Handover.environmentVariable: String(memfd)],
      keep: keep)
    failure =
      "\(handover.token): \(handover.executable) could not be executed: \(String(cString: strerror(e)))"
    log(.error, "upgrade failed, this host goes on as it was: \(failure ?? "")")
    resume()
    server?.resume()
  }

  /// 128 random bits in hex.
  static func token() -> String {
    (0..<2).map { _ in String(UInt64.random(in: 0...UInt64.max), radix: 16) }.joined(separator: "-")
  }
}
