import Foundation

/// The bundled example modules, built as scripts/build-plugins builds them: the two Swift ones
/// SwiftPM built beside the host, and the C one compiled here.
public enum ExampleModules {
  /// Puts the three examples in `dir/plugins`; returns that directory.
  public static func install(in dir: TemporaryDirectory) throws -> String {
    let plugins = dir.url("plugins")
    try FileManager.default.createDirectory(atPath: plugins, withIntermediateDirectories: true)
    let bin = (HostBinary.path as NSString).deletingLastPathComponent
    for lib in ["libCounterModule.so", "libDashboardModule.so"] {
      try FileManager.default.copyItem(
        atPath: (bin as NSString).appendingPathComponent(lib), toPath: plugins + "/" + lib)
    }
    let hello = (HostBinary.packageRoot as NSString).appendingPathComponent("Plugins/HelloC/hello.c")
    let r = try ProcessRunner.run(
      "/usr/bin/env",
      [
        "cc", "-shared", "-fPIC", "-I", ModuleFixture.includeDirectory, "-o", plugins + "/libhelloc.so",
        hello,
      ])
    guard r.status == 0 else { throw CFixture.BuildError(output: r.stderr) }
    return plugins
  }
}
