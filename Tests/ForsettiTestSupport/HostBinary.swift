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
          try FileManager.default.copyItem(atPath: built + "/" + name, toPath: dir + "/" + name)
          chmod(dir + "/" + name, 0o755)
        }
      } catch {
        // The build's own path: a test then fails naming what it could not run, as before.
        return path
      }
      directory = dir
      atexit { try? FileManager.default.removeItem(atPath: OtherUsersCopy.directory) }
      return dir + "/forsetti-host"
    }()
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
