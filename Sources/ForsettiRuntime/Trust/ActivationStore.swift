import ForsettiCore
import FoundationEssentials
import Glibc

/// `STATE/activation.json`: the enabled set and the selected UI module. Read-modify-write goes
/// through `update`, one `StateTransaction` (`STATE/state.lock`), so two commands, or a command
/// and a host, changing the state at once never lose a change.
package struct ActivationStore: Sendable {
  /// The activation file.
  package let path: String
  /// The state directory whose lock `update` holds.
  package let stateDirectory: String

  /// An activation file far beyond any real one is refused rather than read into memory.
  package static let maxBytes = 4 << 20

  /// The store of the state directory `stateDirectory`.
  package init(stateDirectory: String) {
    self.stateDirectory = stateDirectory
    path = PathText.join(stateDirectory, "activation.json")
  }

  /// Why the activation file could not be read, written or locked.
  package enum StoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file exists but is not in the documented form; `why` names the field.
    case malformed(path: String, why: String)
    /// The file exists but cannot be read.
    case read(path: String, errno: Int32)
    case write(AtomicFile.WriteError)
    /// The lock file could not be created or locked.
    case lock(path: String, errno: Int32)

    /// The file the error is about.
    package var path: String {
      switch self {
      case .malformed(let p, _), .read(let p, _), .lock(let p, _): p
      case .write(let w): w.path
      }
    }

    /// What went wrong, without the path.
    package var reason: String {
      switch self {
      case .malformed(_, let why): why
      case .read(_, let e): "cannot be read: \(String(cString: strerror(e)))"
      case .write(.failed(_, let step, let e)): "\(step) failed: \(String(cString: strerror(e)))"
      case .write(.delivered(_, let target)):
        "is a symbolic link to \(target), delivered from elsewhere: change it where it comes from"
      case .lock(_, let e): "cannot be locked: \(String(cString: strerror(e)))"
      }
    }

    package var description: String { "\(path): \(reason)" }
  }

  /// The saved state; nil when there is no file (every eligible module then follows the default
  /// policy and the first UI module by ID is active).
  package func load() throws(StoreError) -> ActivationState? {
    guard let bytes = try readBytes() else { return nil }
    let value: JSONValue
    do { value = try JSONParser.parse(bytes) } catch {
      throw .malformed(path: path, why: "invalid JSON: \(error)")
    }
    switch ActivationState.decode(value) {
    case .success(let s): return s
    case .failure(let e): throw .malformed(path: path, why: e.description)
    }
  }

  /// Replaces the file with `state` (atomic and durable). Only inside a transaction (`update`).
  package func save(_ state: ActivationState) throws(StoreError) {
    do {
      try StateTransaction.write(Array((JSONWriter.string(state.json, pretty: true) + "\n").utf8), to: path)
    } catch {
      throw .write(error)
    }
  }

  /// Applies `change` to the saved state (or to the empty state when there is no file) under
  /// the lock, saves the result when it differs, and returns it.
  @discardableResult
  package func update(_ change: (inout ActivationState) -> Void) throws(StoreError) -> ActivationState {
    try StateTransaction.run(
      stateDirectory: stateDirectory, lockFailed: { StoreError.lock(path: $0.path, errno: $0.errno) }
    ) { () throws(StoreError) in
      let before = try load()
      var state = before ?? ActivationState()
      change(&state)
      if state != before { try save(state) }
      return state
    }
  }

  /// The file's bytes, or nil when it does not exist.
  private func readBytes() throws(StoreError) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else {
      let e = errno
      if e == ENOENT { return nil }
      throw .read(path: path, errno: e)
    }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 16 << 10)
    while true {
      let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
      if n == 0 { return bytes }
      if n < 0 {
        let e = errno
        if e == EINTR { continue }
        throw .read(path: path, errno: e)
      }
      bytes.append(contentsOf: chunk[0..<n])
      guard bytes.count <= Self.maxBytes else {
        throw .malformed(path: path, why: "larger than \(Self.maxBytes) bytes")
      }
    }
  }
}
