import ForsettiCore
import Glibc

/// Writes `runtime.json` and `surface.json` from the module table, so other invocations (`list`,
/// `surface`) can see what this host is doing, and only when their content changed. A round
/// that changes nothing (a supervision pass, a reload to a build at the same path) writes
/// nothing: a rename over an existing file makes ext4 start writing its data out at once
/// (auto_da_alloc), about a millisecond on the host's main thread. A file someone else removed
/// or replaced is written again even when unchanged.
final class RuntimeStatePublisher {
  private let table: ModuleTable
  private let environment: HostEnvironment
  /// The bytes last written to each path, and the file they went into.
  private var written: [String: (bytes: [UInt8], device: UInt64, inode: UInt64)] = [:]
  /// The state directory the host holds by identity (`run`, `dev`): the files go into it
  /// whatever it is called now, never into a directory put at its path later, and each write
  /// first looks whether the path still names it (the host stops when not). nil: by path.
  var hold: StateDirectoryHold?

  init(table: ModuleTable, environment: HostEnvironment) {
    self.table = table
    self.environment = environment
  }

  /// Writes both files as the table is now.
  func persist() {
    let state = RuntimeStateFile(pid: getpid(), records: table.records, surface: table.surface)
    let dir = environment.stateDirectory
    // Whole or absent (renamed into place), but not synced: these files describe a running host
    // (readers check its pid), so after a machine crash there is nothing in them to keep, and
    // two fsyncs cost more than starting a module. Written in the round that changed them, on
    // this thread: a host that dies after a reload leaves the file of the round before, never a
    // torn one.
    do {
      try publish(
        Array(JSONWriter.string(state.runtimeJSON, pretty: true).utf8), name: RuntimeStateFile.runtimeName,
        in: dir)
      try publish(
        Array(JSONWriter.string(state.surfaceJSON, pretty: true).utf8), name: RuntimeStateFile.surfaceName,
        in: dir)
    } catch {
      environment.hostLog(.warning, "could not save runtime state: \(error)")
    }
  }

  /// Writes `bytes` to the file `name` of `stateDirectory` (or of the held directory), whole or
  /// not at all, not synced, unless they are there already.
  private func publish(_ bytes: [UInt8], name: String, in stateDirectory: String) throws(AtomicFile
    .WriteError)
  {
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
