import ForsettiTestSupport
import Foundation
import Testing

/// What the suites that drive a real running `forsetti-host run` on a temporary directory share:
/// modules that say when they start and stop, the host, one-shot commands, and waits on what the
/// host publishes in runtime.json.
protocol LiveHostSuite {
  var dir: TemporaryDirectory { get }
}

extension LiveHostSuite {
  var state: String { dir.url("state") }
  var manifests: String { dir.url("manifests") }

  /// A module that logs `hello from ID` when it starts and `bye from ID` when it stops.
  @discardableResult
  func module(
    _ id: String, type: String = "service", capabilities: [String] = [], product: String? = nil
  ) throws -> String {
    let entry = (id.split(separator: ".").last.map(String.init) ?? "module") + "_entry"
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.type = type
    f.start = "fixture_log(\"hello from \(id)\"); return FORSETTI_OK;"
    f.stop = "fixture_log(\"bye from \(id)\");"
    return try f.install(
      in: dir, name: entry, capabilities: capabilities,
      manifestExtra: product.map { #","iapProductID":"\#($0)""# } ?? "")
  }

  /// `forsetti-host run` on this directory, isolated, with `--for 300` as a safety net: every test
  /// stops its host; a shorter net ended a slow test's host in its middle on a loaded machine.
  func launch(_ extra: [String] = []) throws -> DevHost {
    try DevHost.launch(
      ["run", "--manifests", manifests, "--plugins", dir.url("plugins"), "--state", state, "--for", "300"]
        + extra)
  }

  /// Runs one `forsetti-host` command to completion and expects it to succeed.
  @discardableResult
  func cli(_ args: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> ProcessResult {
    let r = try HostBinary.run(args)
    #expect(
      r.status == 0, "forsetti-host \(args.joined(separator: " ")): \(r.stderr)",
      sourceLocation: sourceLocation)
    return r
  }

  /// `enable`, `disable` or `select` with this directory's state and manifests.
  func activation(_ verb: String, _ target: String, sourceLocation: SourceLocation = #_sourceLocation) throws
  {
    try cli([verb, target, "--state", state, "--manifests", manifests], sourceLocation: sourceLocation)
  }

  /// Waits until `host` publishes `expected` in runtime.json under its own pid (the timeout is a
  /// safety net; a wait stops early once the host has exited).
  func published(_ expected: [String: String], by host: DevHost, timeout: Double = 60) -> RuntimeWait {
    LiveHost.wait(
      stateDirectory: state, pid: host.process.processIdentifier, for: expected, timeout: timeout,
      isRunning: { host.process.isRunning })
  }

  /// Waits until `host`'s control socket is there (`LiveHost.awaitSocket`).
  func answering(_ host: DevHost) -> Bool {
    LiveHost.awaitSocket(stateDirectory: state, isRunning: { host.process.isRunning })
  }

  /// The wait and the host's last lines, for a failure message.
  func why(_ wait: RuntimeWait, _ host: DevHost) -> Comment {
    "\(wait)\nhost output (last 40 lines):\n\(host.lines.suffix(40).joined(separator: "\n"))"
  }
}
