import Foundation

/// Builds real shared objects from C source with the system compiler, as a vendor would.
public enum CFixture {
  public struct BuildError: Error, CustomStringConvertible {
    public var output: String
    public var description: String { "cc failed: \(output)" }
  }

  /// Compiles `source` into `<dir>/<name>` with `cc -shared -fPIC` and returns its path.
  @discardableResult
  public static func sharedObject(
    _ name: String, source: String, in dir: TemporaryDirectory, extraFlags: [String] = []
  ) throws -> String {
    let src = try dir.write("src/\(name).c", source)
    let out = dir.url(name)
    let r = try ProcessRunner.run("/usr/bin/env", ["cc", "-shared", "-fPIC", "-o", out, src] + extraFlags)
    guard r.status == 0 else { throw BuildError(output: r.stderr) }
    return out
  }
}
