import Foundation

/// The built `forsetti-host` executable, run as a real process the way users run it.
public enum HostBinary {
  /// The package root, found from this file's location.
  public static let packageRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return url.path
  }()

  /// Path of the executable built next to the running tests.
  public static var path: String {
    let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
      .appendingPathComponent("forsetti-host").path
    if FileManager.default.isExecutableFile(atPath: beside) { return beside }
    return (packageRoot as NSString).appendingPathComponent(".build/debug/forsetti-host")
  }

  /// Runs `forsetti-host` with `arguments` in `directory`.
  public static func run(_ arguments: [String], in directory: String? = nil) throws -> ProcessResult {
    try ProcessRunner.run(path, arguments, in: directory)
  }
}
