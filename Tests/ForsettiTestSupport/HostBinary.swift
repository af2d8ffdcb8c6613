import Foundation

/// The built `forsetti-host` executable, run as a real process the way users run it.
public enum HostBinary {
  /// The package root, found from this file's location.
  public static let packageRoot: String = {
    _ = ignoresMachineConfiguration
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return url.path
  }()

  /// Path of the executable built next to the running tests.
  public static var path: String {
    _ = ignoresMachineConfiguration
    let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
      .appendingPathComponent("forsetti-host").path
    if FileManager.default.isExecutableFile(atPath: beside) { return beside }
    return (packageRoot as NSString).appendingPathComponent(".build/debug/forsetti-host")
  }

  /// The built `forsetti-host`, with its `forsetti-worker` beside it, for a host or a verb the
  /// tests run as another user (uid 65534 through `setpriv`): copies in a directory of their own
  /// that every user may enter, made once per test process and removed at its exit. The build
  /// itself may lie where only root can enter (a clone in a `mktemp -d`), and a host run as
  /// nobody must still be able to execute itself and find its worker.
  public static var forOtherUsers: String { OtherUsersCopy.host }

  /// Copies the file `from` to `to` (mode 0755) through descriptors closed on exec (see
  /// `copyClosedOnExec`): a copy of the host a test then runs, replaces or upgrades.
  public static func copyExecutable(_ from: String, to: String) -> Bool {
    OtherUsersCopy.copyClosedOnExec(from, to: to)
  }

  private enum OtherUsersCopy {
    /// The directory, for `atexit` (which takes no context). Written once, inside `host`'s
    /// initializer (which Swift runs once, under its own lock), before `atexit` can read it.
    nonisolated(unsafe) static var directory = ""

    static let host: String = {
      let dir = TemporaryDirectory.base + "/forsetti-bin-\(UUID().uuidString)"
      let built = (path as NSString).deletingLastPathComponent
      do {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        chmod(dir, 0o755)
        for name in ["forsetti-host", "forsetti-worker"] {
          guard copyClosedOnExec(built + "/" + name, to: dir + "/" + name) else {
            throw CocoaError(.fileWriteUnknown)
          }
        }
      } catch {
        // The build's own path: a test then fails naming what it could not run, as before.
        return path
      }
      directory = dir
      atexit { try? FileManager.default.removeItem(atPath: OtherUsersCopy.directory) }
      return dir + "/forsetti-host"
    }()

    /// Copies `from` to `to` (mode 0755) through descriptors closed on exec. FileManager's copy
    /// leaves its write descriptor inheritable: a process another test spawned meanwhile held
    /// the new file open for writing until its own exec, and running the copy then failed
    /// "Text file busy" (ETXTBSY, seen under stress-ng from a mode-0700 clone).
    static func copyClosedOnExec(_ from: String, to: String) -> Bool {
      let input = open(from, O_RDONLY | O_CLOEXEC)
      guard input >= 0 else { return false }
      defer { close(input) }
      let output = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o755)
      guard output >= 0 else { return false }
      defer { close(output) }
      var buffer = [UInt8](repeating: 0, count: 1 << 20)
      while true {
        let n = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
        if n == 0 { break }
        guard n > 0 else { return false }
        var done = 0
        while done < n {
          let w = buffer.withUnsafeBytes { b in b.baseAddress.map { write(output, $0 + done, n - done) } ?? -1
          }
          guard w > 0 else { return false }
          done += w
        }
      }
      return fchmod(output, 0o755) == 0
    }
  }

  /// Every `forsetti-host` the tests start, whichever helper starts it, inherits this
  /// environment: an empty FORSETTI_HOST_CONFIG means no default configuration file, so an
  /// /etc/forsetti/host.conf installed on the machine (scripts/package-check installs the
  /// package) changes no test. Set once, before the first host is started; a test of the file
  /// passes --config or its own environment.
  public static let ignoresMachineConfiguration: Void = { setenv("FORSETTI_HOST_CONFIG", "", 1) }()

  /// Runs `forsetti-host` with `arguments` in `directory`.
  public static func run(_ arguments: [String], in directory: String? = nil) throws -> ProcessResult {
    try ProcessRunner.run(path, arguments, in: directory)
  }
}
