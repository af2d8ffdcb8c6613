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
