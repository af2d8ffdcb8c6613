import Foundation

/// `STATE/runtime.json` as a running host last published it: its pid and each module's state.
///
/// Read with Foundation's parser because this target depends on nothing of the package: what
/// the tests check is the file an operator's tooling would read, not the host's own types.
public struct RuntimeSnapshot: Sendable, CustomStringConvertible {
  public var pid: Int32
  /// Module ID → `state` or `state/reason`, e.g. `started`, `blocked/approvalPending`.
  public var modules: [String: String]

  /// `state` or `state/reason` of `moduleID`, or `absent` when the file does not list it.
  public subscript(moduleID: String) -> String { modules[moduleID] ?? "absent" }

  public var description: String {
    "pid \(pid): "
      + modules.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", ")
  }

  /// The file in `stateDirectory`, or nil while it is missing or not (yet) a whole document.
  public static func read(stateDirectory: String) -> RuntimeSnapshot? {
    let path = (stateDirectory as NSString).appendingPathComponent("runtime.json")
    guard let data = FileManager.default.contents(atPath: path),
      let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
      let pid = (object["pid"] as? NSNumber)?.int32Value,
      let list = object["modules"] as? [[String: Any]]
    else { return nil }
    var modules: [String: String] = [:]
    for m in list {
      guard let id = m["moduleID"] as? String, let state = m["state"] as? String else { continue }
      modules[id] = (m["reason"] as? String).map { "\(state)/\($0)" } ?? state
    }
    return RuntimeSnapshot(pid: pid, modules: modules)
  }
}

/// The outcome of waiting for a running host to publish some module states.
public struct RuntimeWait: Sendable, CustomStringConvertible {
  /// Whether the host with the awaited pid published every awaited state.
  public var reached: Bool
  /// The last snapshot read (what the host said instead, when `reached` is false).
  public var last: RuntimeSnapshot?
  /// Whether the host process had exited when the wait gave up.
  public var hostExited: Bool

  public var description: String {
    "\(reached ? "reached" : "not reached"); last runtime.json: \(last.map(\.description) ?? "none")"
      + (hostExited ? "; the host had exited" : "")
  }
}

/// Waiting on a living host through what it publishes.
public enum LiveHost {
  /// Re-reads `STATE/runtime.json` every 25 ms until the host `pid` lists every module of
  /// `expected` in the given state (`started`, `inactive/uiNotSelected`, …), for up to `timeout`
  /// seconds (a safety net, generous for a loaded machine). Stops early once `isRunning` says the
  /// host is gone (after one last read).
  public static func wait(
    stateDirectory: String, pid: Int32, for expected: [String: String], timeout: Double = 60,
    isRunning: () -> Bool = { true }
  ) -> RuntimeWait {
    let end = Date().addingTimeInterval(timeout)
    var last: RuntimeSnapshot?
    while true {
      let alive = isRunning()
      if let s = RuntimeSnapshot.read(stateDirectory: stateDirectory) {
        last = s
        if s.pid == pid, expected.allSatisfy({ s[$0.key] == $0.value }) {
          return RuntimeWait(reached: true, last: s, hostExited: false)
        }
      }
      if !alive || Date() >= end { return RuntimeWait(reached: false, last: last, hostExited: !alive) }
      usleep(25_000)
    }
  }

  /// Waits until `STATE/control.sock` is there: a host publishes runtime.json while it starts
  /// and opens its socket after, so a verb asked right after `wait` may find none. `timeout` is
  /// a safety net; the wait ends once the socket is there or `isRunning` says the host is gone.
  public static func awaitSocket(
    stateDirectory: String, timeout: Double = 60, isRunning: () -> Bool = { true }
  ) -> Bool {
    let socket = stateDirectory + "/control.sock"
    let end = Date().addingTimeInterval(timeout)
    while !FileManager.default.fileExists(atPath: socket) && isRunning() && Date() < end {
      usleep(20_000)
    }
    return FileManager.default.fileExists(atPath: socket)
  }

  /// Writes `text` to `path` as an editor or a deployment tool does: a whole new file renamed
  /// over the old one, so a watcher never reads half of it.
  public static func replaceFile(_ path: String, with text: String) throws {
    try FileManager.default.createDirectory(
      atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
  }
}
