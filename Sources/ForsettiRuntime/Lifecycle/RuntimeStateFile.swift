import ForsettiBridge
import ForsettiCore
import FoundationEssentials
import Glibc

/// What a running host publishes in its state directory: `runtime.json` (its modules and their
/// states) and `surface.json` (the composed UI surface), each stamped with the host's PID.
package struct RuntimeStateFile: Sendable {
  package var pid: Int32
  package var records: [ModuleRecord]
  package var surface: Surface

  static let runtimeName = "runtime.json"
  static let surfaceName = "surface.json"

  package static func runtimePath(_ stateDirectory: String) -> String {
    PathText.join(stateDirectory, runtimeName)
  }

  package static func surfacePath(_ stateDirectory: String) -> String {
    PathText.join(stateDirectory, surfaceName)
  }

  var runtimeJSON: JSONValue {
    .object(
      JSONObject([
        ("pid", .number(String(pid))),
        (
          "modules",
          .array(
            records.map { .object($0.summaryJSON) })
        ),
      ]))
  }

  var surfaceJSON: JSONValue {
    guard case .object(var o) = surface.json else { return surface.json }
    o["pid"] = .number(String(pid))
    return .object(o)
  }

  /// Whether process `pid` is alive (signal 0 probes without sending anything).
  package static func isAlive(_ pid: Int32) -> Bool { pid > 0 && (kill(pid, 0) == 0 || errno == EPERM) }
}

/// Writes the state files only when their content changed. A round that changes nothing (a
/// supervision pass, a reload to a build at the same path) writes nothing: a rename over an
/// existing file makes ext4 start writing its data out at once (auto_da_alloc), about a
/// millisecond on the host's main thread. A file someone else removed or replaced is written
/// again even when unchanged.
final class RuntimeStatePublisher {
  /// The bytes last written to each path, and the file they went into.
  private var written: [String: (bytes: [UInt8], device: UInt64, inode: UInt64)] = [:]
  /// The state directory the host holds by identity (`run`, `dev`): the files go into it
  /// whatever it is called now, never into a directory put at its path later, and each write
  /// first looks whether the path still names it (the host stops when not). nil: by path.
  var hold: StateDirectoryHold?

  /// Writes `bytes` to the file `name` of `stateDirectory` (or of the held directory), whole or
  /// not at all, not synced, unless they are there already.
  func publish(_ bytes: [UInt8], name: String, in stateDirectory: String) throws(AtomicFile.WriteError) {
    guard let hold else {
      try publish(bytes, to: PathText.join(stateDirectory, name))
      return
    }
    hold.check()
    do { try publish(bytes, to: hold.within(name)) } catch {
      // Named as the operator knows it, not through /proc.
      guard case .failed(_, let step, let e) = error else { throw error }
      throw .failed(path: PathText.join(hold.path, name), step: step, errno: e)
    }
  }

  private func publish(_ bytes: [UInt8], to path: String) throws(AtomicFile.WriteError) {
    var st = stat()
    if let w = written[path], w.bytes == bytes, stat(path, &st) == 0, UInt64(st.st_dev) == w.device,
      UInt64(st.st_ino) == w.inode, Int(st.st_size) == bytes.count
    {
      return
    }
    written[path] = nil
    try AtomicFile.write(bytes, to: path, durable: false)
    if stat(path, &st) == 0 { written[path] = (bytes, UInt64(st.st_dev), UInt64(st.st_ino)) }
  }
}
